# Pure rendering for the NixOS module: vipproxy settings (the TOML schema of
# service/config) -> systemd-networkd sections, sysctls, socket listeners and
# the keepalived VRRP instance.
#
# Written with builtins only, so that `make test-nix` can evaluate it with
# `nix-instantiate --eval` without nixpkgs and compare it with the Go
# renderer (`vipproxy network render`): one truth, two languages.
let
  # The defaults of service/config.Default() that the rendering and the
  # module's options read (nix/tests/agree.py holds them to Go's).
  defaults = {
    vip = {
      addresses = [ ];
      port = 6443;
      mode = "vrrp";
      reuse_port = false;
    };
    network = {
      interface = "dummyvip0";
      uplinks = [ ];
      netdev_file = "60-vipproxy.netdev";
      network_file = "60-vipproxy.network";
    };
    keepalived = {
      instance = "vipproxy";
      interface = "";
      router_id = 51;
      priority = 100;
      state = "BACKUP";
      advert_int = 1;
      unicast_src_ip = "";
      unicast_peers = [ ];
      auth_pass = "";
    };
    bgp = {
      local_as = 0;
      router_id = "";
      interface = "vipbgp0";
      hold_time = 9;
      communities = [ ];
      peers = [ ];
    };
  };

  # Settings tables merged over the defaults, one table deep (as TOML).
  withDefaults =
    settings:
    builtins.mapAttrs (table: values: values // (settings.${table} or { })) defaults
    // {
      backend = settings.backend or [ ];
    };

  isIPv6 = addr: builtins.match ".*:.*" addr != null;

  # Go's netip.Addr.IsLoopback: 127.0.0.0/8, or ::1 in any spelling.
  isLoopback =
    addr:
    if isIPv6 addr then
      builtins.match "[0:]*:0*1" addr != null
    else
      builtins.match "127[.][0-9]+[.][0-9]+[.][0-9]+" addr != null;

  # The VIP as a host route: /32 or /128.
  hostPrefix = addr: if isIPv6 addr then "${addr}/128" else "${addr}/32";

  # host:port as systemd's ListenStream= and Go's net.JoinHostPort write it.
  joinHostPort = host: port: if isIPv6 host then "[${host}]:${toString port}" else "${host}:${toString port}";

  hasSuffix =
    suffix: s:
    let
      n = builtins.stringLength s;
      m = builtins.stringLength suffix;
    in
    n >= m && builtins.substring (n - m) m s == suffix;

  # "60-vipproxy.netdev" -> "60-vipproxy": NixOS names the unit file after
  # the attribute and adds the suffix itself.
  unitName =
    suffix: file:
    if hasSuffix suffix file then
      builtins.substring 0 (builtins.stringLength file - builtins.stringLength suffix) file
    else
      file;

  # sysctl.d reads dots as separators; an interface name with a dot
  # (eth0.100) is written in the slash form, where dots are literal.
  sysctlKey =
    iface: name:
    if builtins.match ".*[.].*" iface != null then
      "net/ipv4/conf/${iface}/${name}"
    else
      "net.ipv4.conf.${iface}.${name}";

  # Strip the port from host:port or [v6]:port ("" when there is none).
  splitHostPort =
    address:
    let
      v6 = builtins.match "[[](.*)[]]:([0-9]+)" address;
      v4 = builtins.match "([^:]*):([0-9]+)" address;
    in
    if v6 != null then
      {
        host = builtins.elemAt v6 0;
        port = builtins.elemAt v6 1;
      }
    else if v4 != null then
      {
        host = builtins.elemAt v4 0;
        port = builtins.elemAt v4 1;
      }
    else
      {
        host = address;
        port = "";
      };

  # The sandbox systemd/vipproxy.service and systemd/vipproxy-announce.service
  # share: each adds its identity (capabilities), devices and address
  # families to it (serviceConfig, announceConfig).
  sandbox = {
    DynamicUser = "yes";
    NoNewPrivileges = "yes";
    DevicePolicy = "closed";
    # Filesystem.
    ProtectSystem = "strict";
    ProtectHome = "yes";
    PrivateTmp = "yes";
    PrivateMounts = "yes";
    UMask = "0077";
    # Kernel.
    ProtectKernelTunables = "yes";
    ProtectKernelModules = "yes";
    ProtectKernelLogs = "yes";
    ProtectClock = "yes";
    ProtectControlGroups = "yes";
    ProtectHostname = "yes";
    ProtectProc = "invisible";
    ProcSubset = "pid";
    PrivateIPC = "yes";
    KeyringMode = "private";
    # Process.
    RestrictNamespaces = "yes";
    RestrictRealtime = "yes";
    RestrictSUIDSGID = "yes";
    LockPersonality = "yes";
    MemoryDenyWriteExecute = "yes";
    SystemCallArchitectures = "native";
    SystemCallFilter = [
      "@system-service"
      "~@privileged @resources"
    ];
    SystemCallErrorNumber = "EPERM";
  };
in
rec {
  inherit
    defaults
    withDefaults
    isIPv6
    isLoopback
    hostPrefix
    joinHostPort
    sysctlKey
    ;

  # The [Unit] and [Install] lines of systemd/vipproxy.service and
  # systemd/vipproxy.socket, as NixOS unit options (`make test-nix` checks
  # they equal the files). No network-online.target: health checks mark
  # unreachable backends down until they answer, so waiting for it would
  # only delay the VIP at boot.
  serviceUnit = {
    description = "vipproxy control-plane load balancer";
    documentation = [ "https://github.com/vipproxy/vipproxy" ];
    requires = [ "vipproxy.socket" ];
    after = [ "vipproxy.socket" ];
    wantedBy = [ "multi-user.target" ];
  };
  socketUnit = {
    description = "vipproxy control-plane VIP listener";
    documentation = [ "https://github.com/vipproxy/vipproxy" ];
    wantedBy = [ "sockets.target" ];
  };

  # The [Socket] command of systemd/vipproxy.socket: before binding, name
  # whoever else holds the VIP port (a local apiserver on *:6443) with the
  # fix, instead of systemd's bare "Address already in use".
  socketExec = exe: configPath: {
    ExecStartPre = "${exe} doctor --only vip-port --config ${configPath}";
  };

  # The command lines of systemd/vipproxy.service for this binary and
  # config path (`make test-nix` checks them with /usr/bin/vipproxy): a bad
  # file fails the start, `systemctl reload` reports a refused file, and
  # the daemon learns whether a stop is a restart.
  serviceExec = exe: configPath: {
    ExecStartPre = "${exe} check --quiet --config ${configPath}";
    ExecStart = "${exe} serve --config ${configPath}";
    ExecReload = "${exe} reload --config ${configPath} --pid $MAINPID";
    # As root, before SIGTERM: a restart hands the connections over, a stop
    # drains them (docs/operations.md#stop-drains).
    ExecStop = "+${exe} prestop --pid=\${MAINPID}";
  };

  # The [Socket] and [Service] settings of systemd/vipproxy.socket and
  # systemd/vipproxy.service, less the lines that name paths (ExecStart=,
  # ExecReload=) and the [Unit]/[Install] wiring. `make test-nix` checks
  # that these equal the unit files, so both installs run the same unit.
  socketConfig = {
    FreeBind = "yes";
    NoDelay = "yes";
    Backlog = "4096";
    FileDescriptorName = "vip";
    ReusePort = "no";
  };
  serviceConfig = sandbox // {
    Type = "notify";
    NotifyAccess = "main";
    WatchdogSec = "1min"; # as systemd/vipproxy.service: docs/operations.md#watchdog
    Restart = "on-failure";
    RestartSec = "1s";
    TimeoutStopSec = "45s";
    LimitNOFILE = "65536";
    # A restart hands the open connections over through the file
    # descriptor store: two sockets each; FDSTORE for systemd < 254.
    FileDescriptorStoreMax = "65536";
    Environment = "FDSTORE=65536";
    # Identity: a throwaway user, no capabilities (the listener is inherited).
    CapabilityBoundingSet = "";
    AmbientCapabilities = "";
    PrivateUsers = "yes";
    PrivateDevices = "yes";
    RuntimeDirectory = "vipproxy";
    RuntimeDirectoryMode = "0711"; # probe.sock reachable by keepalived's script user
    StateDirectory = "vipproxy";
    StateDirectoryMode = "0700";
    RestrictAddressFamilies = "AF_INET AF_INET6 AF_UNIX AF_NETLINK"; # netlink: vipproxy_vip_held
  };

  # systemd/vipproxy-announce.service (vip.mode = "bgp"), as NixOS unit
  # options; `make test-nix` checks they equal the file. The announcer
  # alone has CAP_NET_ADMIN (the TUN announce link), never the proxy.
  announceUnit = {
    description = "vipproxy BGP announcement of the VIP while the proxy is ready";
    documentation = [ "https://github.com/vipproxy/vipproxy" ];
    after = [
      "vipproxy.service"
      "bird.service"
    ];
    wantedBy = [ "multi-user.target" ];
  };
  announceExec = exe: configPath: {
    ExecStartPre = "${exe} check --quiet --config ${configPath}";
    ExecStart = "${exe} announce --config ${configPath}";
  };
  announceConfig = sandbox // {
    Type = "notify";
    NotifyAccess = "main";
    Restart = "always";
    RestartSec = "1s";
    CapabilityBoundingSet = "CAP_NET_ADMIN";
    AmbientCapabilities = "CAP_NET_ADMIN";
    DeviceAllow = "/dev/net/tun rw";
    RestrictAddressFamilies = "AF_UNIX AF_NETLINK";
    IPAddressDeny = "any";
  };

  # systemd.network.config.networkConfig where networkd runs for the VIP
  # link alone: networkd's defaults (yes) delete every routing policy rule,
  # and the routes of the links it configures, that no .network file names
  # (a CNI's `ip rule`s, BIRD's routes). The same settings as
  # service/netcfg.ForeignSettings (60-vipproxy.conf in networkd.conf.d).
  networkdForeign = {
    ManageForeignRoutingPolicyRules = "no";
    ManageForeignRoutes = "no";
  };

  # How switch-to-configuration treats vipproxy.service when its unit
  # changes (a new package: ExecStart's store path): restart the service
  # alone. The default (stopIfChanged = true) stops vipproxy.socket with it
  # and starts the socket after the activation: the VIP port refuses
  # connections meanwhile. Restarted, the service leaves the socket, and its
  # queue, with systemd: clients wait in the backlog, none is refused. A
  # settings change reloads instead (reloadTriggers, in module.nix).
  serviceSwitch = {
    restartIfChanged = true;
    stopIfChanged = false;
  };

  # Attribute names for systemd.network.{netdevs,networks}.
  netdevName = settings: unitName ".netdev" (withDefaults settings).network.netdev_file;
  networkName = settings: unitName ".network" (withDefaults settings).network.network_file;

  # The .netdev file, section by section (as the Go renderer writes it).
  netdev = settings: {
    NetDev = {
      Name = (withDefaults settings).network.interface;
      Kind = "dummy";
    };
  };

  # The .network file: the dummy link holds each VIP as a host route, no
  # link-local addresses, configured without carrier, never required for
  # network-online.target; each address with DAD off (every node holds the
  # VIP by design, and an IPv6 VIP must not sit "tentative").
  network =
    settings:
    let
      s = withDefaults settings;
    in
    {
      Match.Name = s.network.interface;
      Network = {
        LinkLocalAddressing = "no";
        ConfigureWithoutCarrier = "yes";
      };
      Address = map (a: {
        Address = hostPrefix a;
        DuplicateAddressDetection = "none";
      }) s.vip.addresses;
      Link.RequiredForOnline = "no";
    };

  # boot.kernel.sysctl: ARP tightened on the uplinks only, never on
  # all/default (those reach pod veths and break pod -> VIP hairpin).
  sysctl =
    settings:
    builtins.listToAttrs (
      builtins.concatMap (up: [
        {
          name = sysctlKey up "arp_ignore";
          value = 1;
        }
        {
          name = sysctlKey up "arp_announce";
          value = 2;
        }
      ]) (withDefaults settings).network.uplinks
    );

  # The ports the VIP serves, as service/config's ServedPorts: the [[port]]
  # tables (settings.port), or one port "api" on vip.port.
  servedPorts =
    settings:
    if (settings.port or [ ]) == [ ] then
      [
        {
          name = "api";
          port = (withDefaults settings).vip.port;
        }
      ]
    else
      map (p: { inherit (p) name port; }) settings.port;

  # The VIP ports as numbers (firewall, the checks against other listeners).
  portNumbers = settings: map (p: p.port) (servedPorts settings);

  # ListenStream= values of port p: every VIP at its number.
  portListenStreams = settings: p: map (a: joinHostPort a p.port) (withDefaults settings).vip.addresses;

  # vipproxy.socket's ListenStream= values: the first port on every VIP.
  listenStreams = settings: portListenStreams settings (builtins.head (servedPorts settings));

  # vipproxy.socket's FileDescriptorName=: "vip" in the one-port form, else
  # the first port's name (service/units).
  firstSocketName = settings: if (settings.port or [ ]) == [ ] then "vip" else (builtins.head settings.port).name;

  # The [Socket] lines `vipproxy units render` adds to every socket's
  # drop-in beyond ListenStream= (service/units listenSection): with
  # vip.reuse_port, ReusePort=yes over the shipped units' ReusePort=no, so
  # the VIP port is shared with a wildcard SO_REUSEPORT listener (RKE2's
  # kube-apiserver with --permit-port-sharing=true).
  listenSocketConfig = settings: if (withDefaults settings).vip.reuse_port then { ReusePort = "yes"; } else { };

  # vipproxy.socket's [Socket] settings for these settings (less the
  # command lines and ListenStream=): the shipped unit's with its drop-in.
  vipSocketConfig =
    settings: socketConfig // { FileDescriptorName = firstSocketName settings; } // listenSocketConfig settings;

  # Every other port's socket unit, vipproxy-port@NAME.socket (as the
  # template systemd/vipproxy-port@.socket with `vipproxy units write`'s
  # drop-in): unit name -> its ListenStream= values, name and [Socket]
  # settings (less the command lines).
  portSockets =
    settings:
    builtins.listToAttrs (
      map (p: {
        name = "vipproxy-port@${p.name}";
        value = {
          inherit (p) name;
          listenStreams = portListenStreams settings p;
          socketConfig = portSocketConfig p.name // listenSocketConfig settings;
        };
      }) (builtins.tail (servedPorts settings))
    );

  # The [Socket] settings of systemd/vipproxy-port@.socket for port name
  # (`make test-nix` checks they equal the template, %i filled in).
  portSocketConfig =
    name:
    builtins.removeAttrs socketConfig [ "FileDescriptorName" ]
    // {
      Service = "vipproxy.service";
      FileDescriptorName = name;
    };
  portSocketUnit = name: {
    description = "vipproxy control-plane VIP listener, port ${name}";
    documentation = [ "https://github.com/vipproxy/vipproxy" ];
    partOf = [ "vipproxy.socket" ];
  };

  # vip.mode = "node-local" (service/config.ModeNodeLocal): a worker-only
  # node's loopback VIP; no dummy link, ARP sysctls or keepalived.
  nodeLocal = settings: (withDefaults settings).vip.mode == "node-local";
  # Only vip.mode = "vrrp" runs keepalived (config.VIPMode.UsesKeepalived).
  vrrpMode = settings: (withDefaults settings).vip.mode == "vrrp";

  # The VIPs a node-local node cannot have: every one that is not loopback.
  nonLoopbackVips = settings: builtins.filter (a: !isLoopback a) (withDefaults settings).vip.addresses;

  ipv4Addresses = settings: builtins.filter (a: !isIPv6 a) (withDefaults settings).vip.addresses;
  ipv6Addresses = settings: builtins.filter isIPv6 (withDefaults settings).vip.addresses;

  # The VRRP interface, as service/config derives it (deriveDefaults):
  # keepalived.interface, else the first uplink, else lo when every VIP is
  # a loopback address (such a VIP never leaves the host), else none.
  vrrpInterface =
    settings:
    let
      s = withDefaults settings;
      vips = s.vip.addresses;
    in
    if s.keepalived.interface != "" then
      s.keepalived.interface
    else if s.network.uplinks != [ ] then
      builtins.head s.network.uplinks
    else if vips != [ ] && builtins.all isLoopback vips then
      "lo"
    else
      "";

  # Name of the vrrp_script that runs `vipproxy probe`.
  probeScriptName = settings: "${(withDefaults settings).keepalived.instance}_probe";

  # services.keepalived.vrrpInstances.<instance>, as `vipproxy keepalived`
  # renders it: the VIPs move to the master's uplink (so only it answers
  # ARP/ND); the probe script makes a node whose proxy has no ready backend
  # give the VIP up. A VRRP instance speaks one address family: the VIPs of
  # the first VIP's family are advertised, the others ride along in
  # virtual_ipaddress_excluded.
  vrrpInstance =
    settings:
    let
      s = withDefaults settings;
      k = s.keepalived;
      iface = vrrpInterface settings;
      vips = s.vip.addresses;
      firstIs6 = vips != [ ] && isIPv6 (builtins.head vips);
      primary = builtins.filter (a: isIPv6 a == firstIs6) vips;
      other = builtins.filter (a: isIPv6 a != firstIs6) vips;
      excluded =
        if other == [ ] then
          ""
        else
          "virtual_ipaddress_excluded {\n"
          + builtins.concatStringsSep "" (map (a: "  ${hostPrefix a} dev ${iface}\n") other)
          + "}\n";
      auth =
        if k.auth_pass == "" then
          ""
        else
          "authentication {\n  auth_type PASS\n  auth_pass ${k.auth_pass}\n}\n";
    in
    {
      interface = iface;
      state = k.state;
      virtualRouterId = k.router_id;
      priority = k.priority;
      unicastSrcIp = if k.unicast_src_ip == "" then null else k.unicast_src_ip;
      unicastPeers = k.unicast_peers;
      virtualIps = map (a: {
        addr = hostPrefix a;
        dev = iface;
      }) primary;
      trackScripts = [ (probeScriptName settings) ];
      extraConfig = "advert_int ${toString k.advert_int}\n" + auth + excluded;
    };

  # services.keepalived.vrrpScripts.<instance>_probe, as `vipproxy
  # keepalived` renders it (service/keepalived probeTiming): every 2 s,
  # down after 5 failures (so a restart of vipproxy.service, whose socket
  # stays with systemd, does not move the VIP), up after 2; a probe may
  # take 5 s on a starved node.
  vrrpScript = command: {
    script = command;
    interval = 2;
    timeout = 5;
    fall = 5;
    rise = 2;
  };

  # Every value a command-line flag gets among flags (a string or a list
  # of strings, each one or several words, as NixOS's extraFlags take them):
  # `--NAME=V`, `--NAME V`, also with one dash (urfave/cli takes both).
  flagValues =
    name: flags:
    let
      words = builtins.filter (w: builtins.isString w && w != "") (
        builtins.split "[[:space:]]+" (builtins.concatStringsSep " " (if builtins.isList flags then flags else [ flags ]))
      );
      n = builtins.length words;
      at = i: builtins.elemAt words i;
      valueAt =
        i:
        let
          joined = builtins.match "--?${name}=(.*)" (at i);
        in
        if joined != null then
          joined
        else if builtins.elem (at i) [ "--${name}" "-${name}" ] && i + 1 < n then
          [ (at (i + 1)) ]
        else
          [ ];
    in
    builtins.concatMap valueAt (builtins.genList (i: i) n);

  # The last value of a flag (the one a CLI keeps), or fallback.
  lastFlag =
    name: fallback: flags:
    let
      vs = flagValues name flags;
    in
    if vs == [ ] then fallback else builtins.elemAt vs (builtins.length vs - 1);

  # The last value RKE2 passes to kube-apiserver's flag name through its
  # --kube-apiserver-arg (NAME=VALUE, a leading "--" dropped as k3s's
  # GetArgs does; NAME alone is a bool flag set, "true"), or null.
  apiserverArg =
    name: flags:
    let
      values = builtins.concatMap (
        a:
        let
          m = builtins.match "(--)?${name}(=(.*))?" a;
        in
        if m == null then
          [ ]
        else if builtins.elemAt m 1 == null then
          [ "true" ]
        else
          [ (builtins.elemAt m 2) ]
      ) (flagValues "kube-apiserver-arg" flags);
    in
    if values == [ ] then null else builtins.elemAt values (builtins.length values - 1);

  # The listeners of a k3s or RKE2 server that may take a VIP port, from
  # its flags: { name, host, port, sharesPort } (sharesPort: bound with
  # SO_REUSEPORT, so a VIP listener with it too may share the port).
  # k3s: its supervisor serves the apiserver on --bind-address (default
  # 0.0.0.0) port --https-listen-port (default 6443). RKE2: kube-apiserver
  # on 0.0.0.0:6443 always (pkg/cli/defaults: APIServerBindAddress; its
  # probes and loopback kubeconfigs need localhost:6443) unless a
  # --kube-apiserver-arg bind-address=... moves it, sharing the port with
  # --kube-apiserver-arg permit-port-sharing=true; RKE2's --bind-address
  # moves only its supervisor, on port 9345.
  rancherListeners =
    kind: flags:
    let
      bind = lastFlag "bind-address" "0.0.0.0" flags;
      apiserverBind = apiserverArg "bind-address" flags;
    in
    if kind == "k3s" then
      [
        {
          name = "apiserver";
          host = bind;
          port = lastFlag "https-listen-port" "6443" flags;
          sharesPort = false;
        }
      ]
    else
      [
        {
          name = "kube-apiserver";
          host = if apiserverBind == null then "0.0.0.0" else apiserverBind;
          port = "6443";
          # Go's strconv.ParseBool, as kube-apiserver reads a bool flag.
          sharesPort = builtins.elem (apiserverArg "permit-port-sharing" flags) [ "1" "t" "T" "true" "TRUE" "True" ];
        }
        {
          name = "supervisor";
          host = bind;
          port = "9345";
          sharesPort = false;
        }
      ];

  # Every address of this node, the VIPs too.
  isWildcard =
    host:
    builtins.elem host [
      "0.0.0.0"
      "::"
      "[::]"
      ""
    ];

  # Whether a listener on host:port takes the VIP listener's address:
  # the VIP port on the wildcard (every address, the VIP's too) or on a VIP.
  listenerOnVip =
    settings: listener:
    builtins.elem (toString listener.port) (map toString (portNumbers settings))
    && (isWildcard listener.host || builtins.elem listener.host (withDefaults settings).vip.addresses);

  # The listeners of a k3s or RKE2 server (rancherListeners) that take a
  # VIP port: all on a VIP port, but a wildcard one bound with
  # SO_REUSEPORT while vipproxy's sockets are too (vip.reuse_port): the
  # kernel then gives the VIP's connections to vipproxy. Never one on the
  # VIP itself (the two would split the VIP's connections).
  rancherListenersOnVip =
    settings: kind: flags:
    builtins.filter (
      l: listenerOnVip settings l && !(l.sharesPort && isWildcard l.host && (withDefaults settings).vip.reuse_port)
    ) (rancherListeners kind flags);

  # Backends that are the VIP listener itself (the proxy would dial itself).
  backendsOnVip =
    settings:
    let
      s = withDefaults settings;
      onVip =
        b:
        let
          hp = splitHostPort b.address;
        in
        builtins.elem hp.host s.vip.addresses && builtins.elem hp.port (map toString (portNumbers settings));
    in
    map (b: b.address) (builtins.filter onVip s.backend);

  # `virtual_server VIP PORT` lines (keepalived IPVS) for a VIP on the VIP
  # port (or on any port when none is given), found in raw keepalived
  # configuration text; mirrors service/keepalived (Conf).CheckVirtualServers.
  virtualServersOnVip =
    settings: text:
    let
      s = withDefaults settings;
      lines = builtins.filter builtins.isString (builtins.split "\n" text);
      fields =
        line:
        builtins.match "[[:space:]]*virtual_server[[:space:]]+([^[:space:]{#!]+)[[:space:]]*([0-9]*).*" line;
      onVip =
        f:
        f != null
        && builtins.elem (builtins.elemAt f 0) s.vip.addresses
        && (builtins.elemAt f 1 == "" || builtins.elem (builtins.elemAt f 1) (map toString (portNumbers settings)));
      hits = builtins.filter onVip (map fields lines);
    in
    map (f: builtins.concatStringsSep " " (builtins.filter (x: x != "") f)) hits;
  # vip.mode = "bgp": every ready node announces the VIPs through BIRD.
  bgpMode = settings: (withDefaults settings).vip.mode == "bgp";

  # The peers with their derived names (peer1, peer2 ... where unnamed).
  bgpPeers =
    settings:
    let
      peers = (withDefaults settings).bgp.peers;
    in
    builtins.genList (
      i:
      {
        name = "peer${toString (i + 1)}";
        bfd = false;
        password = "";
      }
      // builtins.elemAt peers i
    ) (builtins.length peers);

  # UDP ports of BFD (RFC 5881 single hop: control 3784, echo 3785), open
  # when a peer has bfd = true.
  bfdPorts = settings: if builtins.any (p: p.bfd) (bgpPeers settings) then [ 3784 3785 ] else [ ];

  # `vipproxy bird` (service/bird/render.go) in Nix, byte for byte (agree.py
  # compares them): the BIRD include file announcing the VIPs.
  birdConfig =
    settings:
    let
      s = withDefaults settings;
      b = s.bgp;
      join = builtins.concatStringsSep;
      fams = builtins.filter (f: f.vips != [ ]) [
        {
          name = "ipv4";
          suffix = "4";
          vips = builtins.filter (a: !isIPv6 a) s.vip.addresses;
        }
        {
          name = "ipv6";
          suffix = "6";
          vips = builtins.filter isIPv6 s.vip.addresses;
        }
      ];
      community =
        c:
        let
          parts = builtins.filter builtins.isString (builtins.split ":" c);
          kind = if builtins.length parts == 3 then "bgp_large_community" else "bgp_community";
        in
        "        ${kind}.add((${join ", " parts}));\n";
      family =
        f:
        "\n${f.name} table vipproxy${f.suffix};\n\nprotocol direct vipproxy_vip${f.suffix} {\n"
        + "    ${f.name} { table vipproxy${f.suffix}; };\n    interface \"${b.interface}\";\n}\n\n"
        + "filter vipproxy_export${f.suffix} {\n    if net ~ [ ${join ", " (map hostPrefix f.vips)} ] then {\n"
        + join "" (map community b.communities)
        + "        accept;\n    }\n    reject;\n}\n";
      keepalive = if b.hold_time / 3 > 1 then b.hold_time / 3 else 1;
      channel =
        f:
        "    ${f.name} {\n        table vipproxy${f.suffix};\n        import none;\n"
        + "        export filter vipproxy_export${f.suffix};\n    };\n";
      peer =
        p:
        "\nprotocol bgp vipproxy_${p.name} {\n    local as ${toString b.local_as};\n"
        + "    neighbor ${p.address} as ${toString p.as};\n"
        + "    hold time ${toString b.hold_time};\n    keepalive time ${toString keepalive};\n"
        + "    connect retry time 5;\n    graceful restart off;\n"
        + (if p.bfd then "    bfd on;\n" else "")
        + (if p.password != "" then "    password \"${p.password}\";\n" else "")
        + join "" (map channel (builtins.filter (f: (f.name == "ipv6") == isIPv6 p.address) fams))
        + "}\n";
    in
    birdHeader b.interface
    + "\nrouter id ${b.router_id};\n"
    + join "" (map family fams)
    + (
      if bfdPorts settings != [ ] then
        "\n# BFD sessions for the peers with bfd = true.\nprotocol bfd vipproxy_bfd {\n}\n"
      else
        ""
    )
    + join "" (map peer (bgpPeers settings));

  birdHeader = iface: ''
    # generated by vipproxy bird; do not edit
    # Include it from BIRD's main file (Debian: /etc/bird/bird.conf), which
    # keeps its "protocol device" (BIRD learns the interfaces through it):
    #   include "/etc/bird/vipproxy.conf";
    # The VIPs are announced while they are on the announce link ${iface}, which
    # vipproxy announce holds only while this node's vipproxy is ready; the
    # link goes with that process, even on SIGKILL, and BIRD withdraws at once.
  '';
}
