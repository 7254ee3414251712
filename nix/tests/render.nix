# What the NixOS module derives from one vipproxy TOML file, as JSON for
# agree.py:  nix-instantiate --eval --strict --json render.nix --arg file ./cases/x.toml
{ file }:
let
  l = import ../lib.nix;
  s = builtins.fromTOML (builtins.readFile file);
in
{
  netdevName = l.netdevName s;
  networkName = l.networkName s;
  netdev = l.netdev s;
  network = l.network s;
  sysctl = l.sysctl s;
  listenStreams = l.listenStreams s;
  firstSocketName = l.firstSocketName s;
  portSockets = l.portSockets s;
  # Each socket unit's [Socket] settings, less the command lines.
  socketConfigs = { vipproxy = l.vipSocketConfig s; } // builtins.mapAttrs (_: p: p.socketConfig) (l.portSockets s);
  probeScriptName = l.probeScriptName s;
  instanceName = s.keepalived.instance or l.defaults.keepalived.instance;
  vrrpInstance = l.vrrpInstance s;
  vrrpScript = l.vrrpScript "PROBE";
  backendsOnVip = l.backendsOnVip s;
  birdConfig = if l.bgpMode s then l.birdConfig s else null;
}
