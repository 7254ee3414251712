# nix/module.nix evaluated by the real module system (lib.evalModules of
# the real nixpkgs lib) next to the NixOS options it sets, as declared in
# nixpkgs (./nixos-options.nix): a wrong option name or type throws here as
# it does in `nixos-rebuild`. Each case is a node configuration; it passes
# when the whole configuration evaluates and exactly the expected
# assertions fail. The planted cases must throw (or fail an assertion):
# they show the check catches a wrong name, a wrong type and the old
# keepalived.openFirewall pass-through on an nftables node.
#   nix-instantiate --eval --strict --json nix/tests/nixos-eval.nix \
#     --arg lib 'import /var/cache/vipproxy-nixpkgs-lib/compat.nix' [--arg module ./module.nix]
{
  lib,
  module ? ../module.nix,
}:
let
  nixos = import ./nixos-options.nix { inherit lib; };

  # What the module takes from pkgs: the package (a derivation, never
  # built), coreutils and the TOML format (its type as in nixpkgs'
  # pkgs-lib/formats.nix; generate gives a store-like path).
  fakeDrv =
    name:
    derivation {
      inherit name;
      system = "x86_64-linux";
      builder = "/bin/false";
    };
  pkgs = {
    vipproxy = fakeDrv "vipproxy" // {
      meta.mainProgram = "vipproxy";
    };
    coreutils = fakeDrv "coreutils";
    bird3 = fakeDrv "bird3";
    formats.toml = _: {
      type =
        let
          valueType =
            lib.types.oneOf [
              lib.types.bool
              lib.types.int
              lib.types.float
              lib.types.str
              lib.types.path
              (lib.types.attrsOf valueType)
              (lib.types.listOf valueType)
            ]
            // {
              description = "TOML value";
            };
        in
        valueType;
      # A store-like path that changes with the content, as a real one does.
      generate =
        name: value:
        "/nix/store/${builtins.substring 0 32 (builtins.hashString "sha256" (builtins.toJSON value))}-${name}";
    };
  };

  eval =
    modules:
    lib.evalModules {
      specialArgs = { inherit pkgs; };
      modules = [
        nixos.base
        nixos.systemd
        nixos.networkd
        nixos.firewall
        nixos.keepalived
        nixos.bird
        nixos.kubernetes
        nixos.rancher
        module
      ] ++ modules;
    };

  backends = map (n: {
    name = "cp${toString n}";
    address = "192.0.2.1${toString n}:6443";
  }) [ 1 2 3 ];
  # A node with these settings; scripted networking (NixOS' default) must
  # say which DNS it keeps: resolved false unless given (null: unset).
  nodeWith =
    {
      resolved ? false,
    }:
    settings: extra: {
      services.vipproxy = {
        enable = true;
        inherit settings;
      };
      services.resolved = lib.optionalAttrs (resolved != null) { enable = resolved; };
      imports = [ extra ];
    };
  node = nodeWith { };
  ipv4 = {
    vip.addresses = [ "192.0.2.10" ];
    backend = backends;
    network.uplinks = [ "eth0" ];
    keepalived.priority = 150;
  };
  dualStack = ipv4 // {
    vip.addresses = [
      "192.0.2.10"
      "2001:db8::10"
    ];
  };
  ipv6Only = {
    vip.addresses = [ "2001:db8::10" ];
    backend = map (b: b // { address = "[2001:db8::1${lib.removePrefix "cp" b.name}]:6443"; }) backends;
    keepalived.interface = "eth0";
  };

  # examples/rke2.toml (the API and RKE2's supervisor, 9345, on the VIP),
  # and the RKE2 flags that let it share 6443 and move the supervisor.
  rke2Example = ipv4 // builtins.removeAttrs (builtins.fromTOML (builtins.readFile ../../examples/rke2.toml)) [ "keepalived" ];
  rke2Sharing = [ "--bind-address=192.0.2.11 --kube-apiserver-arg=permit-port-sharing=true" ];
  # examples/rke2.toml with vip.reuse_port as given.
  rke2ReusePort = reuse: rke2Example // { vip = rke2Example.vip // { reuse_port = reuse; }; };
  # A node with these vipproxy settings and RKE2 started with these flags.
  rke2Node =
    settings: flags:
    node settings {
      services.rke2 = {
        enable = true;
        extraFlags = flags;
      };
    };

  # A worker-only node: vipproxy on a loopback VIP for its own kubelet.
  nodeLocalSettings = {
    vip = {
      mode = "node-local";
      addresses = [ "127.0.0.1" ];
      port = 7445;
    };
    backend = backends;
  };

  # Everything the module defines, forced: type errors and unknown
  # options throw here; returns the messages of the failing assertions.
  run =
    modules:
    let
      c = (eval modules).config;
      json = builtins.toJSON {
        inherit (c)
          warnings
          systemd
          boot
          environment
          networking
          meta
          ;
        services = {
          inherit (c.services) vipproxy keepalived resolved k3s rke2;
          # services.bird.config has no default: read only where enabled.
          bird = if c.services.bird.enable then c.services.bird else null;
        };
      };
      failing = map (a: a.message) (lib.filter (a: !a.assertion) c.assertions);
    in
    builtins.seq json { inherit c json failing; };

  # A case: the node, the words each failing assertion must contain (in
  # order), and what must hold of its config.
  case =
    {
      modules,
      fails ? [ ],
      check ? (_: true),
    }:
    let
      r = run modules;
      matches = lib.zipListsWith (msg: word: lib.hasInfix word msg) r.failing fails;
    in
    if lib.length r.failing != lib.length fails || !lib.all (x: x) matches then
      "failing assertions: ${builtins.toJSON r.failing}, expected ones mentioning ${builtins.toJSON fails}"
    # NixOS has no /usr/bin/vipproxy: every command names the store path.
    else if lib.hasInfix "/usr/bin/" r.json then
      "evaluates, but the configuration names /usr/bin"
    else if !(check r.c) then
      "evaluates, but the configuration is not as expected"
    else
      "ok";

  hasVrrpRule = text: lib.hasInfix "112" text;

  # A controller node announcing the VIP by BGP (settings.vip.mode = "bgp").
  bgpSettings = ipv4 // {
    vip = {
      mode = "bgp";
      addresses = [ "192.0.2.10" ];
    };
    keepalived = { };
    bgp = {
      local_as = 65001;
      router_id = "192.0.2.11";
      peers = [
        {
          name = "tor1";
          address = "192.0.2.1";
          as = 65000;
          bfd = true;
        }
      ];
    };
  };
  countInfix =
    word: text: builtins.length (builtins.filter builtins.isList (builtins.split word text));

  cases = {
    # BIRD gets vipproxy's file (as `vipproxy bird` renders it) and one
    # protocol device; the announcer runs the real unit's settings; BGP and
    # BFD open in the firewall, no VRRP; the dummy link and uplink sysctls as
    # in vrrp mode; no keepalived.
    bgp = case {
      modules = [ (node bgpSettings { services.vipproxy.openFirewall = true; }) ];
      check =
        c:
        c.services.bird.enable
        && c.services.bird.config == "protocol device {\n}\n" + (import ../lib.nix).birdConfig bgpSettings
        && lib.hasInfix "protocol bgp vipproxy_tor1 {" c.services.bird.config
        && lib.hasInfix "bfd on;" c.services.bird.config
        && !c.services.keepalived.enable
        && c.systemd.services.vipproxy-announce.serviceConfig.ExecStart
          == "${pkgs.vipproxy}/bin/vipproxy announce --config /etc/vipproxy/vipproxy.toml"
        && c.systemd.services.vipproxy-announce.serviceConfig.AmbientCapabilities == "CAP_NET_ADMIN"
        && c.systemd.services.vipproxy.serviceConfig.CapabilityBoundingSet == ""
        && c.networking.firewall.allowedTCPPorts == [ 179 6443 ]
        && c.networking.firewall.allowedUDPPorts == [ 3784 3785 ]
        && c.networking.firewall.extraCommands == ""
        && c.boot.kernel.sysctl."net.ipv4.conf.eth0.arp_ignore" == 1
        && c.systemd.network.netdevs != { };
    };
    bgpWithKeepalived = case {
      modules = [ (node bgpSettings { services.vipproxy.keepalived.enable = true; }) ];
      fails = [ "runs no keepalived" ];
    };
    # An operator's own BIRD config with its protocol device: BIRD allows
    # only one, so the module adds none when told.
    bgpOwnBird = case {
      modules = [
        (node bgpSettings {
          services.vipproxy.birdDeviceProtocol = false;
          services.bird.config = "protocol device {\n  scan time 10;\n}\n";
        })
      ];
      check = c: countInfix "(^|\n)protocol device" c.services.bird.config == 1 && lib.hasInfix "scan time 10;" c.services.bird.config;
    };

    # No dummy link, sysctls, keepalived or firewall opening; the socket on
    # the loopback VIP.
    nodeLocal = case {
      modules = [ (node nodeLocalSettings { services.vipproxy.openFirewall = true; }) ];
      check =
        c:
        c.systemd.sockets.vipproxy.listenStreams == [ "127.0.0.1:7445" ]
        && !c.services.keepalived.enable
        && c.boot.kernel.sysctl == { }
        && c.systemd.network.netdevs == { }
        && c.systemd.network.networks == { }
        && c.networking.firewall.allowedTCPPorts == [ ]
        && c.networking.firewall.extraCommands == "";
    };
    nodeLocalNotLoopback = case {
      modules = [
        (node (
          nodeLocalSettings
          // {
            vip = nodeLocalSettings.vip // {
              addresses = [ "192.0.2.10" ];
            };
            network.uplinks = [ "eth0" ];
          }
        ) { })
      ];
      fails = [
        "loopback address"
        "remove settings.network.uplinks"
      ];
    };
    nodeLocalWithKeepalived = case {
      modules = [ (node nodeLocalSettings { services.vipproxy.keepalived.enable = true; }) ];
      fails = [ "runs no keepalived" ];
    };
    # k0s: three ports, a socket unit each (FileDescriptorName= is per unit).
    k0sPorts = case {
      modules = [
        (node (
          ipv4
          // {
            backend = map (b: b // { address = lib.removeSuffix ":6443" b.address; }) backends;
            port = [
              { name = "api"; port = 6443; }
              { name = "konnectivity"; port = 8132; health.type = "tls"; }
              { name = "join"; port = 9443; backend_port = 9443; required = false; }
            ];
          }
        ) { services.vipproxy.openFirewall = true; })
      ];
      check =
        c:
        c.services.vipproxy.settings.vip.port == null
        && c.systemd.sockets.vipproxy.socketConfig.FileDescriptorName == "api"
        && c.systemd.sockets.vipproxy.wants == [ "vipproxy-port@join.socket" "vipproxy-port@konnectivity.socket" ]
        && c.systemd.sockets."vipproxy-port@konnectivity".listenStreams == [ "192.0.2.10:8132" ]
        && c.systemd.sockets."vipproxy-port@konnectivity".socketConfig.FileDescriptorName == "konnectivity"
        && c.systemd.sockets."vipproxy-port@join".socketConfig.Service == "vipproxy.service"
        && c.systemd.sockets."vipproxy-port@join".partOf == [ "vipproxy.socket" ]
        # vip.reuse_port unset: the shipped units' one owner per port.
        && c.systemd.sockets.vipproxy.socketConfig.ReusePort == "no"
        && c.systemd.sockets."vipproxy-port@join".socketConfig.ReusePort == "no"
        && lib.all (p: lib.elem p c.networking.firewall.allowedTCPPorts) [ 6443 8132 9443 ];
    };
    ipv4 = case {
      modules = [ (node ipv4 { }) ];
      check =
        c:
        c.systemd.sockets.vipproxy.listenStreams == [ "192.0.2.10:6443" ]
        && c.boot.kernel.sysctl."net.ipv4.conf.eth0.arp_ignore" == 1
        && c.services.keepalived.vrrpInstances.vipproxy.virtualRouterId == 51
        && lib.hasPrefix "${pkgs.vipproxy}/bin/vipproxy probe " c.services.keepalived.vrrpScripts.vipproxy_probe.script
        && c.systemd.services.vipproxy.serviceConfig.ExecStart
          == "${pkgs.vipproxy}/bin/vipproxy serve --config /etc/vipproxy/vipproxy.toml"
        && c.systemd.services.vipproxy.after == [ "vipproxy.socket" ]
        # The port-holder check before binding, as systemd/vipproxy.socket has it.
        && c.systemd.sockets.vipproxy.socketConfig.ExecStartPre
          == "${pkgs.vipproxy}/bin/vipproxy doctor --only vip-port --config /etc/vipproxy/vipproxy.toml"
        && c.systemd.services.vipproxy.serviceConfig.RuntimeDirectoryMode == "0711"
        # networkd runs for the VIP link alone: it keeps others' rules and routes.
        && c.systemd.network.config.networkConfig.ManageForeignRoutes == "no"
        && c.systemd.network.config.networkConfig.ManageForeignRoutingPolicyRules == "no"
        && !c.services.resolved.enable;
    };
    dualStack = case {
      modules = [ (node dualStack { }) ];
      check =
        c:
        map (a: a.Address) c.systemd.network.networks."60-vipproxy".addresses == [
          "192.0.2.10/32"
          "2001:db8::10/128"
        ];
    };
    ipv6Only = case {
      modules = [ (node ipv6Only { }) ];
      check = c: c.boot.kernel.sysctl == { } && c.services.keepalived.vrrpInstances.vipproxy.interface == "eth0";
    };
    # The operator also writes the uplink's ARP sysctls (as on Debian, or
    # from `vipproxy network render`): nixpkgs' sysctl type takes one
    # definition per key, so the module's must give way to an equal one.
    uplinkSysctlAlsoSet = case {
      modules = [
        (node ipv4 {
          boot.kernel.sysctl."net.ipv4.conf.eth0.arp_ignore" = 1;
          boot.kernel.sysctl."net.ipv4.conf.eth0.arp_announce" = 2;
        })
      ];
      check =
        c:
        c.boot.kernel.sysctl."net.ipv4.conf.eth0.arp_ignore" == 1
        && c.boot.kernel.sysctl."net.ipv4.conf.eth0.arp_announce" == 2;
    };
    # ...but a weaker value on an uplink is refused with the fix.
    uplinkSysctlWeakened = case {
      modules = [ (node ipv4 { boot.kernel.sysctl."net.ipv4.conf.eth0.arp_ignore" = 0; }) ];
      fails = [ "net.ipv4.conf.eth0.arp_ignore" ];
    };
    openFirewallIptables = case {
      modules = [ (node ipv4 { services.vipproxy.openFirewall = true; }) ];
      check =
        c:
        c.networking.firewall.backend == "iptables"
        && c.networking.firewall.allowedTCPPorts == [ 6443 ]
        && hasVrrpRule c.networking.firewall.extraCommands
        && c.networking.firewall.extraInputRules == "";
    };
    openFirewallNftables = case {
      modules = [
        (node ipv4 {
          services.vipproxy.openFirewall = true;
          networking.nftables.enable = true;
        })
      ];
      check =
        c:
        c.networking.firewall.allowedTCPPorts == [ 6443 ]
        && hasVrrpRule c.networking.firewall.extraInputRules
        && c.networking.firewall.extraCommands == "";
    };
    openFirewallFirewalld = case {
      modules = [
        (node ipv4 {
          services.vipproxy.openFirewall = true;
          services.firewalld.enable = true;
        })
      ];
      fails = [ "firewalld" ];
    };
    # networkd manages the node already: resolved is the node's own default.
    useNetworkd = case {
      modules = [ (nodeWith { resolved = null; } dualStack { networking.useNetworkd = true; }) ];
      # networkd.conf stays the operator's when networkd runs the node.
      check =
        c:
        c.services.resolved.enable
        && c.systemd.network.enable
        && !(c.systemd.network.config.networkConfig ? ManageForeignRoutes);
    };
    # Scripted networking, but networkd also manages a link of the operator's:
    # networkd.conf is theirs.
    networkdOtherNetwork = case {
      modules = [ (node ipv4 { systemd.network.networks."10-eth0".matchConfig.Name = "eth0"; }) ];
      check = c: !(c.systemd.network.config.networkConfig ? ManageForeignRoutes);
    };
    # The operator's own value wins over the module's default.
    networkdForeignOperatorChoice = case {
      modules = [ (node ipv4 { systemd.network.config.networkConfig.ManageForeignRoutes = "yes"; }) ];
      check =
        c:
        c.systemd.network.config.networkConfig.ManageForeignRoutes == "yes"
        && c.systemd.network.config.networkConfig.ManageForeignRoutingPolicyRules == "no";
    };
    # Scripted networking and no word on DNS: the module asks instead of
    # letting networkd switch /etc/resolv.conf to the stub.
    scriptedNetworkingResolvedUnset = case {
      modules = [ (nodeWith { resolved = null; } ipv4 { }) ];
      fails = [ "services.resolved.enable" ];
    };
    scriptedNetworkingResolvedChosen = case {
      modules = [ (nodeWith { resolved = true; } ipv4 { }) ];
      check = c: c.services.resolved.enable && !c.systemd.network.wait-online.enable;
    };
    kubeApiserverWildcard = case {
      modules = [ (node ipv4 { services.kubernetes.apiserver.enable = true; }) ];
      fails = [ "services.kubernetes.apiserver.bindAddress" ];
    };
    # k3s and RKE2 servers bind *:6443 by default: the VIP's port on the VIP.
    k3sDefaultFlags = case {
      modules = [ (node ipv4 { services.k3s.enable = true; }) ];
      fails = [ "services.k3s.extraFlags" ];
    };
    # --node-ip is what k3s advertises, not where it listens.
    k3sNodeIpOnly = case {
      modules = [
        (node ipv4 {
          services.k3s = {
            enable = true;
            nodeIP = "192.0.2.11";
            extraFlags = [ "--cluster-init" ];
          };
        })
      ];
      fails = [ "--bind-address" ];
    };
    k3sOnNodeAddress = case {
      modules = [
        (node ipv4 {
          services.k3s = {
            enable = true;
            extraFlags = [
              "--cluster-cidr 10.42.0.0/16"
              "--bind-address 192.0.2.11"
            ];
          };
        })
      ];
      check = c: lib.hasInfix "--bind-address 192.0.2.11" c.systemd.services.k3s.serviceConfig.ExecStart;
    };
    # extraFlags as one string (either str (listOf str)).
    k3sOnNodeAddressFlagString = case {
      modules = [
        (node ipv4 {
          services.k3s = {
            enable = true;
            extraFlags = "--bind-address=192.0.2.11 --disable traefik";
          };
        })
      ];
    };
    k3sOnVipItself = case {
      modules = [
        (node ipv4 {
          services.k3s = {
            enable = true;
            extraFlags = [ "--bind-address=192.0.2.10" ];
          };
        })
      ];
      fails = [ "services.k3s.extraFlags" ];
    };
    k3sOtherPort = case {
      modules = [
        (node ipv4 {
          services.k3s = {
            enable = true;
            extraFlags = [ "--https-listen-port=7443" ];
          };
        })
      ];
    };
    # An agent runs no apiserver (its client load balancer is on 6444).
    k3sAgent = case {
      modules = [
        (node ipv4 {
          services.k3s = {
            enable = true;
            role = "agent";
            serverAddr = "https://192.0.2.10:6443";
            tokenFile = "/run/keys/k3s-token";
          };
        })
      ];
      check = c: c.systemd.services.k3s.serviceConfig.Type == "exec";
    };
    # A config file may set bind-address: warned, not refused.
    k3sConfigPath = case {
      modules = [
        (node ipv4 {
          services.k3s = {
            enable = true;
            configPath = "/etc/k3s/server.yaml";
          };
        })
      ];
      check = c: lib.any (lib.hasInfix "services.k3s.configPath") c.warnings;
    };
    # Older nixpkgs' rke2 module defaults configPath to RKE2's own file:
    # state outside the configuration, still refused.
    rke2DefaultConfigPath = case {
      modules = [
        (node ipv4 {
          services.rke2 = {
            enable = true;
            configPath = "/etc/rancher/rke2/config.yaml";
          };
        })
      ];
      fails = [ "services.rke2.extraFlags" ];
    };
    rke2DefaultFlags = case {
      modules = [ (rke2Node ipv4 [ ]) ];
      fails = [ "services.rke2.extraFlags" ];
    };
    # RKE2's --bind-address moves its supervisor only: kube-apiserver stays
    # on *:6443, the VIP's port.
    rke2OnNodeAddress = case {
      modules = [
        (node dualStack {
          services.rke2 = {
            enable = true;
            cni = "cilium";
            extraFlags = [ "--bind-address=192.0.2.11" ];
          };
        })
      ];
      fails = [ "--kube-apiserver-arg=permit-port-sharing=true" ];
    };
    # kube-apiserver shares *:6443 (SO_REUSEPORT) with vipproxy's VIP
    # sockets, the supervisor on the node address: every socket reuses.
    # examples/rke2.toml (vip.reuse_port = true) with the recipe's flags.
    rke2PortSharing = case {
      modules = [ (rke2Node rke2Example rke2Sharing) ];
      check =
        c:
        c.systemd.sockets.vipproxy.socketConfig.ReusePort == "yes"
        && c.systemd.sockets."vipproxy-port@supervisor".socketConfig.ReusePort == "yes"
        && c.systemd.sockets."vipproxy-port@supervisor".listenStreams == [ "192.0.2.10:9345" ];
    };
    # permit-port-sharing alone: vipproxy's sockets still refuse to share.
    rke2PortSharingWithoutReusePort = case {
      modules = [ (rke2Node (rke2ReusePort false) rke2Sharing) ];
      fails = [ "vip.reuse_port false" ];
    };
    # vip.reuse_port alone: kube-apiserver binds without SO_REUSEPORT.
    rke2ReusePortWithoutPortSharing = case {
      modules = [ (rke2Node (rke2ReusePort true) [ "--bind-address=192.0.2.11" ]) ];
      fails = [ "permit-port-sharing unset" ];
    };
    # examples/rke2.toml serves the supervisor's 9345 on the VIP: without
    # --bind-address RKE2's supervisor holds *:9345.
    rke2SupervisorOnVip = case {
      modules = [ (rke2Node (rke2ReusePort true) [ "--kube-apiserver-arg=permit-port-sharing=true" ]) ];
      fails = [ "supervisor listens on 0.0.0.0:9345" ];
    };
    rke2SupervisorOnVipDefaultFlags = case {
      modules = [ (rke2Node rke2Example [ ]) ];
      fails = [ "0.0.0.0:9345" ];
    };
    rke2ApiserverArg = case {
      modules = [ (rke2Node ipv4 [ "--kube-apiserver-arg=bind-address=192.0.2.11" ]) ];
    };
    # The nodes of the NixOS module VM test (vm-nixos-module), as written.
    vmTestNodeIptables = case {
      modules = [
        (import ../../vm-tests/nixos-module-node.nix {
          package = pkgs.vipproxy;
          index = 2;
          priority = 150;
        })
      ];
      check = c: hasVrrpRule c.networking.firewall.extraCommands;
    };
    vmTestNodeNftables = case {
      modules = [
        (import ../../vm-tests/nixos-module-node.nix {
          package = pkgs.vipproxy;
          index = 4;
          priority = 90;
          nftables = true;
        })
      ];
      check = c: hasVrrpRule c.networking.firewall.extraInputRules;
    };
    kubeApiserverOnNodeAddress = case {
      modules = [
        (node ipv4 {
          services.kubernetes.apiserver = {
            enable = true;
            bindAddress = "192.0.2.11";
          };
        })
      ];
    };
  };

  # What nixpkgs' switch-to-configuration-ng does with a unit whose file
  # changed (handle_modified_unit, transcribed): sockets are left alone (a
  # FIXME there); a change of X-Reload-Triggers only reloads; then
  # reloadIfChanged reloads, restartIfChanged = false skips,
  # stopIfChanged = false restarts the service alone, and otherwise a
  # socket-activated service is stopped with its socket and only the
  # socket is started after the activation (the VIP port refuses meanwhile).
  switchAction =
    {
      name,
      unit,
      onlyReloadTriggers,
    }:
    if lib.hasSuffix ".socket" name then
      "leave it (sockets are not restarted)"
    else if onlyReloadTriggers || unit.reloadIfChanged then
      "reload"
    else if !unit.restartIfChanged then
      "skip"
    else if !unit.stopIfChanged then
      "restart the service alone"
    else
      "stop the service and its socket, start the socket after the activation";

  # One node before and after a change: what switch-to-configuration does
  # with vipproxy.service and vipproxy.socket.
  switchCase =
    {
      before,
      after,
      service,
      socket,
    }:
    let
      unitsOf = modules: (run modules).c.systemd;
      a = unitsOf before;
      b = unitsOf after;
      json = builtins.toJSON;
      strip = u: json (builtins.removeAttrs u [ "reloadTriggers" ]);
      actionOf =
        kind: name: if json a.${kind}.vipproxy == json b.${kind}.vipproxy then
          "nothing"
        else
          switchAction {
            inherit name;
            unit = b.${kind}.vipproxy;
            onlyReloadTriggers = kind == "services" && strip a.services.vipproxy == strip b.services.vipproxy;
          };
      got = {
        service = actionOf "services" "vipproxy.service";
        socket = actionOf "sockets" "vipproxy.socket";
      };
    in
    if got == { inherit service socket; } then
      "ok"
    else
      "evaluates, but switch-to-configuration would ${got.service} vipproxy.service and ${got.socket} vipproxy.socket; want ${service} and ${socket}";

  newPackage = fakeDrv "vipproxy-2" // {
    meta.mainProgram = "vipproxy";
  };
  switchCases = {
    # A new package (ExecStart's store path): the daemon restarts, the
    # socket and its queue stay with systemd (its changed ExecStartPre= is
    # read when it next starts).
    switchPackageUpgrade = switchCase {
      before = [ (node ipv4 { }) ];
      after = [ (node ipv4 { services.vipproxy.package = newPackage; }) ];
      service = "restart the service alone";
      socket = "leave it (sockets are not restarted)";
    };
    # A settings change: only the config file's store path (a reload trigger).
    switchSettingsChange = switchCase {
      before = [ (node ipv4 { }) ];
      after = [ (node (ipv4 // { keepalived.priority = 90; }) { }) ];
      service = "reload";
      socket = "nothing";
    };
    # A new VIP: the daemon reloads, but switch leaves the socket bound to
    # the old VIP (documented: systemctl restart vipproxy.socket).
    switchVipChange = switchCase {
      before = [ (node ipv4 { }) ];
      after = [ (node (ipv4 // { vip.addresses = [ "192.0.2.20" ]; }) { }) ];
      service = "reload";
      socket = "leave it (sockets are not restarted)";
    };
  };

  # Breaks that must not pass: each must throw or fail an assertion.
  caught =
    modules:
    let
      r = builtins.tryEval (run modules);
    in
    !r.success || r.value.failing != [ ];
  planted = {
    wrongOptionName = caught [
      (node ipv4 { services.keepalived.vrrpInstances.vipproxy.virtualRouterID = 51; })
    ];
    wrongType = caught [ (node ipv4 { systemd.sockets.vipproxy.listenStreams = "192.0.2.10:6443"; }) ];
    wrongSectionField = caught [
      (node ipv4 { systemd.network.networks."60-vipproxy".networkConfig.LinkLocalAdressing = "no"; })
    ];
    # extraFlags is either str (listOf str): an attribute set is refused.
    k3sExtraFlagsWrongType = caught [ (node ipv4 { services.k3s.extraFlags = { bind-address = "192.0.2.11"; }; }) ];
    k3sRoleNotInEnum = caught [ (node ipv4 { services.k3s.role = "controller"; }) ];
    wrongUnitName = caught [ (node ipv4 { systemd.services.vipproxy.after = [ "vipproxy.sockets" ]; }) ];
    keepalivedOpenFirewallOnNftables = caught [
      (node ipv4 {
        networking.nftables.enable = true;
        services.keepalived.openFirewall = true;
      })
    ];
  };
in
{
  cases = cases // switchCases;
  planted = lib.mapAttrs (_: c: if c then "caught" else "NOT CAUGHT") planted;
}
