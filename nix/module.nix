# services.vipproxy: the apiserver VIP proxy on a Kubernetes control-plane
# node. `settings` is vipproxy's TOML file (see examples/vipproxy.toml); the
# module derives everything else from it: the socket and service units, the
# dummy link holding the VIP (systemd-networkd), the per-uplink ARP sysctls
# and keepalived's VRRP instance. The rendering itself lives in ./lib.nix.
{
  config,
  options,
  lib,
  pkgs,
  ...
}:

let
  cfg = config.services.vipproxy;
  vlib = import ./lib.nix;
  settingsFormat = pkgs.formats.toml { };
  # vip.port is null with [[port]] tables (settings.port): TOML has no null.
  configFile = settingsFormat.generate "vipproxy.toml" (
    cfg.settings
    // {
      vip =
        if cfg.settings.vip.port or null == null then
          builtins.removeAttrs cfg.settings.vip [ "port" ]
        else
          cfg.settings.vip;
    }
  );

  # The daemon and the probe read the config at its usual path, so that a
  # settings change leaves the unit files alone and only reloads the
  # daemon (reloadTriggers) instead of restarting it.
  configPath = "/etc/vipproxy/vipproxy.toml";
  exe = lib.getExe cfg.package;

  s = cfg.settings;
  discoveryCreds = cfg.discoveryCredentials or { };
  # The settings.discovery keys services.vipproxy.discoveryCredentials fills.
  discoveryKeys = [
    "kubeconfig"
    "ca_file"
    "cert_file"
    "key_file"
    "token_file"
  ];
  vips = s.vip.addresses;
  # A worker-only node (settings.vip.mode = "node-local"): a loopback VIP,
  # no dummy link, no ARP sysctls, no keepalived.
  nodeLocal = vlib.nodeLocal s;
  # Controller nodes in several racks or subnets (settings.vip.mode = "bgp"):
  # the VIP on the dummy link as in vrrp mode, announced by BIRD while the
  # proxy is ready (vipproxy-announce); no keepalived.
  bgp = vlib.bgpMode s;
  iface = s.network.interface;
  # arp_ignore/arp_announce per uplink (boot.kernel.sysctl).
  uplinkSysctl = vlib.sysctl s;
  vrrpInterface = vlib.vrrpInterface s;
  keepalivedText = config.services.keepalived.extraConfig;
  # nixpkgs' keepalived module declares IPVS virtual servers only through
  # extraConfig; a `virtualServers` option, where another module adds one,
  # is searched for the VIP too.
  declaredVirtualServers = config.services.keepalived.virtualServers or { };
  stringLeaves =
    v:
    if builtins.isString v then
      [ v ]
    else if builtins.isList v then
      lib.concatMap stringLeaves v
    else if builtins.isAttrs v then
      lib.concatMap stringLeaves (builtins.attrValues v)
    else
      [ ];
  # The firewall NixOS runs: networking.firewall.backend where nixpkgs
  # has it, else networking.nftables.enable decides (as nixpkgs did).
  firewallBackend =
    config.networking.firewall.backend
      or (if config.networking.nftables.enable then "nftables" else "iptables");
  vrrpProtocol = "112";
  networkdForVipOnly =
    !config.networking.useNetworkd
    && builtins.attrNames (removeAttrs config.systemd.network.networks [ (vlib.networkName s) ]) == [ ];
  kubeApiserver = config.services.kubernetes.apiserver;
  # The local apiserver listens on every address, the VIP included.
  kubeApiserverOnVip =
    kubeApiserver.enable
    && vlib.listenerOnVip s {
      host = kubeApiserver.bindAddress;
      port = kubeApiserver.securePort;
    };
  # k3s and RKE2 servers (services.k3s / services.rke2, where this nixpkgs
  # has them) listen on *:6443 by default, RKE2's supervisor on *:9345.
  # Their flags say where (vlib.rancherListeners); a configPath file of the
  # operator's may say so too, which evaluation cannot read: then a warning
  # instead of an assertion. The distribution's own default file
  # (/etc/rancher/<k>/config.yaml, which older nixpkgs' rke2 module gives
  # as configPath's default) is state outside the configuration: it does
  # not count.
  rancher =
    kind:
    let
      c = config.services.${kind} or { enable = false; };
      listeners = vlib.rancherListenersOnVip s kind c.extraFlags;
      takes = l: ''
        services.${kind} runs a ${kind} server whose ${l.name} listens on ${l.host}:${toString l.port}, that is on the VIP
        too, so vipproxy cannot bind the VIP on port ${toString l.port} (bind: address already in use).
      '';
      # k3s: --bind-address moves the supervisor, which serves the apiserver.
      k3sFix = l: ''
        (k3s's default is every address, 0.0.0.0:6443.) Add "--bind-address=<this node's own address>" (the host of
        its entry in services.vipproxy.settings.backend) to services.k3s.extraFlags, or move one of them to another
        port (--https-listen-port in services.k3s.extraFlags, or services.vipproxy.settings.vip.port).
      '';
      # RKE2: kube-apiserver stays on *:6443 (its --bind-address moves only
      # the supervisor); the two share the port through SO_REUSEPORT.
      rke2Fix =
        l:
        if l.name == "kube-apiserver" then
          (
            if vlib.isWildcard l.host then
              ""
            else
              ''
                Remove --kube-apiserver-arg=bind-address=${l.host} from services.rke2.extraFlags: RKE2's own probes and
                kubeconfigs need its kube-apiserver on localhost:6443.
              ''
          )
          + ''
            RKE2 always starts kube-apiserver on 0.0.0.0:6443 (its --bind-address moves only the supervisor on 9345).
            Share the port: add "--kube-apiserver-arg=permit-port-sharing=true" to services.rke2.extraFlags and set
            services.vipproxy.settings.vip.reuse_port = true (now: permit-port-sharing ${
              if l.sharesPort then "true" else "unset"
            }, vip.reuse_port ${lib.boolToString (s.vip.reuse_port or false)}); both then bind with SO_REUSEPORT and
            the VIP's connections reach vipproxy. Or serve the API on another VIP port (services.vipproxy.settings).
          ''
        else
          ''
            (--bind-address sets it; the default is every address.) Add "--bind-address=<this node's own address>"
            (the host of its entry in services.vipproxy.settings.backend) to services.rke2.extraFlags: it moves
            the supervisor alone, never kube-apiserver.
          '';
    in
    rec {
      inherit kind;
      server = c.enable && c.role == "server";
      onVip = server && listeners != [ ];
      unsure =
        onVip
        && !builtins.elem (toString c.configPath) [
          ""
          "/etc/rancher/${kind}/config.yaml"
        ];
      message =
        lib.concatMapStrings (l: takes l + (if kind == "k3s" then k3sFix l else rke2Fix l)) listeners
        + ''
          Flags in /etc/rancher/${kind}/config.yaml are state this configuration cannot see: give them here.
        '';
    };
  rancherServers = map rancher [
    "k3s"
    "rke2"
  ];
  mentionsVip =
    str: lib.any (vip: str == vip || lib.hasPrefix "${vip} " str || lib.hasPrefix "${vip}:" str) vips;

  portModule = {
    freeformType = settingsFormat.type;
    options = {
      name = lib.mkOption {
        type = lib.types.strMatching "[a-z][a-z0-9-]*";
        example = "konnectivity";
        description = "The port's name: logs, metrics (port=\"konnectivity\"), /status and its socket unit vipproxy-port@NAME.socket.";
      };
      port = lib.mkOption {
        type = lib.types.port;
        example = 8132;
        description = "The port clients connect to on the VIP; backend_port (default the same) is the port on each backend.";
      };
    };
  };

  # The VIP ports: every [[port]], or vip.port.
  vipPorts = vlib.portNumbers s;
  vipPortsText = builtins.concatStringsSep ", " (map toString vipPorts);

  backendModule =
    { config, ... }:
    {
      freeformType = settingsFormat.type;
      options = {
        address = lib.mkOption {
          type = lib.types.str;
          example = "192.0.2.11:6443";
          description = "The apiserver as `host:port` (`[v6]:port` for IPv6); host is an IP or a DNS name.";
        };
        name = lib.mkOption {
          type = lib.types.str;
          default = config.address;
          defaultText = lib.literalExpression "address";
          example = "cp1";
          description = "Label for logs, metrics and /status.";
        };
      };
    };
in
{
  options.services.vipproxy = {
    enable = lib.mkEnableOption "vipproxy, the layer-4 proxy on the Kubernetes apiserver VIP";

    package = lib.mkPackageOption pkgs "vipproxy" { };

    settings = lib.mkOption {
      default = { };
      description = ''
        vipproxy's configuration, written to `${configPath}` as TOML. Every key
        of `examples/vipproxy.toml` may be set here; the options below are the
        ones the module itself reads. Changing settings reloads the daemon
        (SIGHUP) instead of restarting it.
      '';
      example = lib.literalExpression ''
        {
          vip.addresses = [ "192.0.2.10" ];
          backend = [
            { name = "cp1"; address = "192.0.2.11:6443"; }
            { name = "cp2"; address = "192.0.2.12:6443"; }
            { name = "cp3"; address = "192.0.2.13:6443"; }
          ];
          network.uplinks = [ "eth0" ];
          keepalived.priority = 150;
          health.type = "tls";
        }
      '';
      type = lib.types.submodule (
        { config, ... }:
        {
        freeformType = settingsFormat.type;
        # Every default here is lib.nix's (vlib.defaults), which
        # nix/tests/agree.py holds to service/config.Default().
        options = {
          vip.addresses = lib.mkOption {
            type = lib.types.nonEmptyListOf lib.types.str;
            example = [
              "192.0.2.10"
              "2001:db8::10"
            ];
            description = "The VIPs clients connect to: at most one IPv4 address and any number of IPv6 addresses.";
          };
          vip.port = lib.mkOption {
            type = lib.types.nullOr lib.types.port;
            default = if config.port == [ ] then vlib.defaults.vip.port else null;
            defaultText = lib.literalExpression "if port == [ ] then ${toString vlib.defaults.vip.port} else null";
            description = "TCP port of the VIP listener (all VIPs share it) when there is no `port` list; null with one (each port names its own).";
          };
          port = lib.mkOption {
            type = lib.types.listOf (lib.types.submodule portModule);
            default = [ ];
            example = lib.literalExpression ''
              [
                { name = "api"; port = 6443; }
                { name = "konnectivity"; port = 8132; health.type = "tls"; }
                { name = "join"; port = 9443; health.type = "tls"; }
              ]
            '';
            description = ''
              The ports the VIP serves ([[port]] tables), each with its own pool and
              health state over the same backends; backends are then hosts without a
              port. Any key of a [[port]] table (backend_port, required, health) may be
              set. The first port is vipproxy.socket, every other one its own
              vipproxy-port@NAME.socket.
            '';
          };
          vip.mode = lib.mkOption {
            type = lib.types.enum [
              "vrrp"
              "node-local"
              "bgp"
            ];
            default = vlib.defaults.vip.mode;
            description = ''
              How this node holds the VIP. `vrrp`: a control-plane node;
              keepalived moves the VIP between the nodes, and every node holds
              it on the dummy link to serve it locally. `node-local`: a
              worker-only node; the VIP is a loopback address (e.g.
              `127.0.0.1`, port 7445) that this node's kubelet uses, and the
              module sets up no dummy link, no ARP sysctls and no keepalived.
              `bgp`: a control-plane node whose routers reach it by BGP (nodes in
              several racks or subnets): every ready node announces the VIP
              through BIRD ({option}`services.bird`, with the file
              `vipproxy bird` renders from `settings.bgp`) and
              vipproxy-announce.service; no keepalived.
            '';
          };
          vip.reuse_port = lib.mkOption {
            type = lib.types.bool;
            default = vlib.defaults.vip.reuse_port;
            description = ''
              Bind every VIP listener with `SO_REUSEPORT` (`ReusePort=yes` on
              vipproxy.socket and every vipproxy-port@NAME.socket), sharing the
              port with a local listener on every address that sets it too, as
              the same user: RKE2's kube-apiserver, always on `0.0.0.0:6443`,
              with `--kube-apiserver-arg=permit-port-sharing=true` in
              {option}`services.rke2.extraFlags`. Connections to the VIP still
              reach vipproxy alone. Off: one owner per port.
            '';
          };
          backend = lib.mkOption {
            type = lib.types.listOf (lib.types.submodule backendModule);
            default = [ ];
            description = "The apiservers vipproxy balances over; each node usually lists all of them, itself included.";
          };
          network.interface = lib.mkOption {
            type = lib.types.str;
            default = vlib.defaults.network.interface;
            description = "The dummy link that holds the VIPs on every node.";
          };
          network.uplinks = lib.mkOption {
            type = lib.types.listOf lib.types.str;
            default = vlib.defaults.network.uplinks;
            example = [ "eth0" ];
            description = ''
              Interfaces facing the clients. They get `arp_ignore=1` and
              `arp_announce=2`, so only the node holding the VIP on its uplink
              (the VRRP master) answers ARP for it. Never `all` or `default`:
              those also reach pod veths and break pod-to-VIP hairpin traffic.
            '';
          };
          keepalived.router_id = lib.mkOption {
            type = lib.types.ints.between 1 255;
            default = vlib.defaults.keepalived.router_id;
            description = "VRRP virtual_router_id, the same on every node of the cluster.";
          };
          keepalived.priority = lib.mkOption {
            type = lib.types.ints.between 1 254;
            default = vlib.defaults.keepalived.priority;
            description = "This node's VRRP priority; the highest live node holds the VIP.";
          };
        };
        }
      );
    };

    openFirewall = lib.mkOption {
      type = lib.types.bool;
      default = false;
      description = ''
        Whether to open the VIP port in the firewall and, with
        {option}`services.vipproxy.keepalived.enable`, VRRP (IP protocol
        112). Works with the iptables and the nftables firewall
        ({option}`networking.nftables.enable`): VRRP goes to
        {option}`networking.firewall.extraCommands` or
        {option}`networking.firewall.extraInputRules` respectively, never
        through {option}`services.keepalived.openFirewall`, which writes
        iptables commands the nftables firewall refuses. With
        `settings.vip.mode = "bgp"`: BGP (TCP 179) and, when a peer has
        `bfd = true`, BFD (UDP 3784 and 3785) instead of VRRP.
      '';
    };

    discoveryCredentials = lib.mkOption {
      type = lib.types.attrsOf lib.types.str;
      default = { };
      example = {
        ca_file = "/etc/kubernetes/pki/ca.crt";
        cert_file = "/var/lib/kubelet/pki/kubelet-client-current.pem";
        key_file = "/var/lib/kubelet/pki/kubelet-client-current.pem";
      };
      description = ''
        Credential files for `settings.discovery` (set
        `settings.discovery.enable = true`), keyed by the setting they
        fill: `kubeconfig`, `ca_file`, `cert_file`, `key_file`,
        `token_file`. The service's dynamic user cannot read root's files,
        so each one is passed with systemd's `LoadCredential=` and the
        setting points at `/run/credentials/vipproxy.service/NAME`. A
        credential is copied when the service starts: a rotated file
        reaches vipproxy at its next restart. A kubeconfig passed this way
        must hold its certificates inline (`*-data`). The RBAC it needs is
        in `examples/rbac-discovery.yaml` (the group `system:nodes` lets
        the kubelet's client certificate, as in the example, do).
      '';
    };

    birdDeviceProtocol = lib.mkOption {
      type = lib.types.bool;
      default = true;
      description = ''
        With `settings.vip.mode = "bgp"`: add BIRD's `protocol device` to
        {option}`services.bird.config` (BIRD learns the announce link
        through it, and allows only one). Set it to false when your own
        {option}`services.bird.config` declares one.
      '';
    };

    keepalived.enable = lib.mkOption {
      type = lib.types.bool;
      default = vlib.vrrpMode config.services.vipproxy.settings;
      defaultText = lib.literalExpression ''config.services.vipproxy.settings.vip.mode == "vrrp"'';
      description = ''
        Whether to configure keepalived to move the VIPs between the nodes:
        a VRRP instance on the uplink (`settings.keepalived`) that tracks
        `vipproxy probe`, so a node whose proxy has no ready backend gives
        the VIP up.
      '';
    };
  };

  config = lib.mkIf cfg.enable (
    lib.mkMerge [
      {
        assertions = [
          {
            assertion = vlib.virtualServersOnVip s keepalivedText == [ ];
            message = ''
              services.keepalived.extraConfig declares an IPVS virtual_server for the vipproxy VIP
              (${lib.concatStringsSep ", " (vlib.virtualServersOnVip s keepalivedText)}). Remove it: vipproxy replaces
              IPVS load balancing. IPVS needs arp_ignore on all interfaces, which breaks pod -> VIP hairpin
              traffic on nodes that are both control plane and worker.
            '';
          }
          {
            assertion = !(lib.any mentionsVip (stringLeaves declaredVirtualServers));
            message = ''
              services.keepalived.virtualServers balances the vipproxy VIP. Remove that virtual server:
              vipproxy replaces IPVS load balancing (IPVS needs arp_ignore on all interfaces, which breaks
              pod -> VIP hairpin traffic on control-plane nodes that also run pods).
            '';
          }
          {
            assertion = !nodeLocal || vlib.nonLoopbackVips s == [ ];
            message = ''
              services.vipproxy.settings.vip.mode = "node-local" serves this node only, but settings.vip.addresses
              has ${lib.concatStringsSep ", " (vlib.nonLoopbackVips s)}: use a loopback address such as 127.0.0.1
              (the kubelet's kubeconfig names it), or settings.vip.mode = "vrrp" on control-plane nodes.
            '';
          }
          {
            assertion = !nodeLocal || s.network.uplinks == [ ];
            message = ''
              services.vipproxy.settings.vip.mode = "node-local" sets no ARP sysctls (its VIP never leaves the
              node): remove settings.network.uplinks.
            '';
          }
          {
            assertion = !nodeLocal || !cfg.keepalived.enable;
            message = ''
              services.vipproxy.settings.vip.mode = "node-local" runs no keepalived (the VIP is this node's
              loopback address): remove services.vipproxy.keepalived.enable = true.
            '';
          }
          {
            assertion = !bgp || !cfg.keepalived.enable;
            message = ''
              services.vipproxy.settings.vip.mode = "bgp" runs no keepalived (BIRD announces the VIP from
              every ready node): remove services.vipproxy.keepalived.enable = true.
            '';
          }
          {
            assertion = nodeLocal || vlib.ipv4Addresses s == [ ] || s.network.uplinks != [ ];
            message = ''
              services.vipproxy.settings.vip.addresses has an IPv4 VIP but settings.network.uplinks is empty.
              Set settings.network.uplinks to the interface(s) facing the clients (e.g. [ "eth0" ]): their
              ARP sysctls must be tightened or every node answers ARP for the VIP.
            '';
          }
          {
            assertion = nodeLocal || !cfg.keepalived.enable || vrrpInterface != "";
            message = ''
              services.vipproxy.keepalived.enable needs a VRRP interface: set settings.network.uplinks
              or settings.keepalived.interface.
            '';
          }
          {
            assertion = vlib.backendsOnVip s == [ ];
            message = ''
              services.vipproxy.settings.backend points at the VIP listener itself
              (${lib.concatStringsSep ", " (vlib.backendsOnVip s)}): the proxy would connect to itself.
              List the apiservers' own addresses (e.g. each node's IP on port 6443) instead.
            '';
          }
          {
            assertion = s.backend != [ ];
            message = "services.vipproxy.settings.backend is empty: list the apiservers (name and address).";
          }
          {
            assertion = !kubeApiserverOnVip;
            message = ''
              services.kubernetes.apiserver listens on ${kubeApiserver.bindAddress}:${toString kubeApiserver.securePort}, that is on
              every address of this node including the VIP, so vipproxy cannot bind the VIP on port ${vipPortsText}
              (bind: address already in use). Set services.kubernetes.apiserver.bindAddress to this node's own
              address (the host of its entry in services.vipproxy.settings.backend), or move one of them to
              another port (services.kubernetes.apiserver.securePort or services.vipproxy.settings.vip.port).
            '';
          }
        ]
        ++ map (r: {
          assertion = !r.onVip || r.unsure;
          inherit (r) message;
        }) rancherServers
        ++ [
          {
            # networkd's module turns systemd-resolved on by mkDefault
            # whenever systemd.network.enable; a value set at a higher
            # priority (a plain definition) is the operator's choice.
            assertion =
              nodeLocal
              || config.networking.useNetworkd
              || options.services.resolved.enable.highestPrio < (lib.mkDefault true).priority;
            message = ''
              services.vipproxy enables systemd-networkd for the VIP's dummy link, and NixOS's networkd
              module then turns systemd-resolved on by default: /etc/resolv.conf would move to the
              127.0.0.53 stub behind your back (kubelet and CoreDNS would see a loopback resolver). This
              node uses scripted networking (networking.useNetworkd = false): say which DNS it keeps.
              Set services.resolved.enable = false to keep /etc/resolv.conf as it is, or
              services.resolved.enable = true to switch to systemd-resolved.
            '';
          }
          {
            assertion = !cfg.openFirewall || firewallBackend != "firewalld";
            message = ''
              services.vipproxy.openFirewall opens ports in the iptables and nftables firewalls only. With
              firewalld, open TCP port ${vipPortsText} and VRRP (IP protocol 112) in the zone of
              the uplink yourself and set services.vipproxy.openFirewall = false.
            '';
          }
          {
            assertion = lib.all (u: !(lib.elem u [ "all" "default" "lo" ])) s.network.uplinks;
            message = ''
              services.vipproxy.settings.network.uplinks must name real uplink interfaces, not all, default
              or lo: arp_ignore on all/default also reaches pod veths and breaks pod -> VIP hairpin traffic.
            '';
          }
        ];

        warnings = map (
          r:
          r.message
          + "(services.${r.kind}.configPath is set: if that file already sets what this asks for, all is well.)"
        ) (builtins.filter (r: r.unsure) rancherServers);

        environment.etc."vipproxy/vipproxy.toml".source = configFile;
        environment.systemPackages = [ cfg.package ];

        # systemd owns the VIP listener: FreeBind lets it bind before the VIP
        # exists, and the socket (with its queue) survives daemon restarts.
        # [Unit] and [Install] as in systemd/vipproxy.socket.
        # One socket unit per port (FileDescriptorName= is per unit): the
        # first port here, each other one vipproxy-port@NAME, which this one
        # pulls in (as `vipproxy units write`'s drop-in does).
        systemd.sockets =
          {
            vipproxy = vlib.socketUnit // {
              listenStreams = vlib.listenStreams s;
              socketConfig = vlib.vipSocketConfig s // vlib.socketExec exe configPath;
              wants = map (u: "${u}.socket") (builtins.attrNames (vlib.portSockets s));
            };
          }
          // builtins.mapAttrs (
            _: p:
            vlib.portSocketUnit p.name
            // {
              inherit (p) listenStreams;
              socketConfig = p.socketConfig // vlib.socketExec exe configPath;
            }
          ) (vlib.portSockets s);

        # [Unit] and [Install] as in systemd/vipproxy.service.
        systemd.services.vipproxy = vlib.serviceUnit // vlib.serviceSwitch // {
          reloadTriggers = [ configFile ];
          serviceConfig = vlib.serviceConfig // vlib.serviceExec exe configPath;
        };

        networking.firewall.allowedTCPPorts = lib.mkIf (cfg.openFirewall && !nodeLocal) vipPorts;
      }

      # The dummy link holding the VIPs, through systemd-networkd (as
      # `vipproxy network apply` does on other distributions), and the
      # uplink sysctls: nothing of it on a node-local node.
      (lib.mkIf (!nodeLocal) {
        systemd.network.enable = true;
        systemd.network.netdevs.${vlib.netdevName s}.netdevConfig = (vlib.netdev s).NetDev;
        systemd.network.networks.${vlib.networkName s} =
          let
            unit = vlib.network s;
          in
          {
            matchConfig = unit.Match;
            networkConfig = unit.Network;
            addresses = unit.Address;
            linkConfig = unit.Link;
          };
        # Where networkd runs for the VIP link alone (scripted networking, no
        # other systemd.network.networks), it must not delete the rules and
        # routes of a CNI or BIRD (mkDefault: the operator may decide
        # otherwise). Where the operator's own networkd config manages
        # links, networkd.conf stays theirs.
        systemd.network.config.networkConfig = lib.mkIf networkdForVipOnly (
          builtins.mapAttrs (_: lib.mkDefault) vlib.networkdForeign
        );
        # With scripted networking networkd manages only the dummy link,
        # which is never required for online: nothing to wait for.
        systemd.network.wait-online.enable = lib.mkIf (!config.networking.useNetworkd) (lib.mkDefault false);
        networking.dhcpcd.denyInterfaces = [ iface ];

        # Per uplink only, never all/default. nixpkgs' sysctl type takes one
        # definition per key (config/sysctl.nix, mergeOneOption): mkDefault,
        # so that the operator's own equal line does not clash with it, and
        # an assertion instead of a silent loss where theirs differs.
        boot.kernel.sysctl = builtins.mapAttrs (_: lib.mkDefault) uplinkSysctl;
        assertions = lib.mapAttrsToList (name: value: {
          assertion = config.boot.kernel.sysctl.${name} or null == value;
          message = ''
            boot.kernel.sysctl."${name}" is ${builtins.toJSON (config.boot.kernel.sysctl.${name} or null)}, but services.vipproxy
            needs ${toString value} on its uplinks (settings.network.uplinks), or every node answers ARP for the VIP.
            Remove that definition (the module sets it) or set it to ${toString value}.
          '';
        }) uplinkSysctl;
      })

      # VRRP through the firewall NixOS runs (both chains accept what the
      # rules before their final refusal let through).
      (lib.mkIf (cfg.openFirewall && cfg.keepalived.enable && firewallBackend == "iptables") {
        networking.firewall.extraCommands = ''
          ip46tables -A nixos-fw -p ${vrrpProtocol} -m comment --comment "services.vipproxy.openFirewall: VRRP" -j nixos-fw-accept
        '';
      })
      (lib.mkIf (cfg.openFirewall && cfg.keepalived.enable && firewallBackend == "nftables") {
        networking.firewall.extraInputRules = ''
          meta l4proto ${vrrpProtocol} accept comment "services.vipproxy.openFirewall: VRRP"
        '';
      })

      (lib.mkIf (discoveryCreds != { }) {
        assertions = [
          {
            assertion = builtins.all (n: builtins.elem n discoveryKeys) (builtins.attrNames discoveryCreds);
            message = ''
              services.vipproxy.discoveryCredentials may name only ${lib.concatStringsSep ", " discoveryKeys}
              (the settings.discovery keys they fill), not ${lib.concatStringsSep ", " (builtins.attrNames discoveryCreds)}.
            '';
          }
        ];
        services.vipproxy.settings.discovery = builtins.mapAttrs (
          n: _: "/run/credentials/vipproxy.service/${n}"
        ) discoveryCreds;
        systemd.services.vipproxy.serviceConfig.LoadCredential = builtins.attrValues (
          builtins.mapAttrs (n: path: "${n}:${path}") discoveryCreds
        );
      })

      # BGP: BIRD with vipproxy's file (as `vipproxy bird` renders it), the
      # announcer, and the firewall for BGP (TCP 179) and BFD.
      (lib.mkIf bgp {
        services.bird = {
          enable = true;
          config = (if cfg.birdDeviceProtocol then "protocol device {\n}\n" else "") + vlib.birdConfig s;
        };
        systemd.services.vipproxy-announce = vlib.announceUnit // {
          restartTriggers = [ configFile ];
          serviceConfig = vlib.announceConfig // vlib.announceExec exe configPath;
        };
        networking.firewall.allowedTCPPorts = lib.mkIf cfg.openFirewall [ 179 ];
        networking.firewall.allowedUDPPorts = lib.mkIf cfg.openFirewall (vlib.bfdPorts s);
      })

      # (node-local with keepalived.enable is refused above; none is set up.)
      (lib.mkIf (cfg.keepalived.enable && !nodeLocal) {
        services.keepalived = {
          enable = true;
          vrrpScripts.${vlib.probeScriptName s} = vlib.vrrpScript "${exe} probe --config ${configPath}" // {
            # The probe only reads the config and asks the local admin endpoint.
            user = "nobody";
          };
          vrrpInstances.${s.keepalived.instance or vlib.defaults.keepalived.instance} = vlib.vrrpInstance s;
        };
      })
    ]
  );

  meta.maintainers = [ ];
}
