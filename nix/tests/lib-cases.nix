# Expected outputs of nix/lib.nix for hand-written inputs. Evaluates to the
# list of failing cases (empty when all pass):
#   nix-instantiate --eval --strict --json nix/tests/lib-cases.nix
let
  l = import ../lib.nix;
  v4 = {
    vip.addresses = [ "192.0.2.10" ];
    backend = [
      { address = "192.0.2.11:6443"; }
      { address = "192.0.2.10:6443"; }
      { address = "192.0.2.10:8443"; }
    ];
    network.uplinks = [ "eth0" ];
  };
  v6 = {
    vip.addresses = [ "2001:db8::10" ];
    vip.port = 443;
    backend = [
      { address = "[2001:db8::10]:443"; }
      { address = "[2001:db8::11]:443"; }
    ];
    network.uplinks = [ "eth0.100" ];
    keepalived.interface = "eth9";
  };
  keepalivedConf = ''
    virtual_server 192.0.2.10 6443 {   # IPVS on the VIP port: rejected
      real_server 10.0.0.1 6443 { }
    }
    virtual_server 192.0.2.10 80 {     # another port: allowed
    }
    ! virtual_server 192.0.2.10 6443 { (a comment)
    virtual_server 192.0.2.99 6443 {   # another address: allowed
    }
  '';
  k0s = v4 // {
    backend = [ { address = "192.0.2.11"; } ];
    port = [
      { name = "api"; port = 6443; }
      { name = "konnectivity"; port = 8132; health.type = "tls"; }
      { name = "join"; port = 9443; backend_port = 9444; }
    ];
  };
  cases = {
    servedPortsLegacy = {
      actual = l.servedPorts v6;
      expected = [ { name = "api"; port = 443; } ];
    };
    k0sFirstPortOnVipproxySocket = {
      actual = [ (l.listenStreams k0s) (l.firstSocketName k0s) (l.firstSocketName v4) ];
      expected = [ [ "192.0.2.10:6443" ] "api" "vip" ];
    };
    k0sOtherPortsOwnSockets = {
      actual = builtins.mapAttrs (_: p: builtins.removeAttrs p [ "socketConfig" ]) (l.portSockets k0s);
      expected = {
        "vipproxy-port@konnectivity" = { name = "konnectivity"; listenStreams = [ "192.0.2.10:8132" ]; };
        "vipproxy-port@join" = { name = "join"; listenStreams = [ "192.0.2.10:9443" ]; };
      };
    };
    # vip.reuse_port: ReusePort=yes on every socket, as the Go drop-ins say.
    reusePortEverySocket = {
      actual =
        let
          s = k0s // { vip = k0s.vip // { reuse_port = true; }; };
        in
        [ (l.vipSocketConfig s).ReusePort ] ++ map (p: p.socketConfig.ReusePort) (builtins.attrValues (l.portSockets s));
      expected = [ "yes" "yes" "yes" ];
    };
    reusePortOffByDefault = {
      actual = [ (l.vipSocketConfig k0s).ReusePort ] ++ map (p: p.socketConfig.ReusePort) (builtins.attrValues (l.portSockets k0s));
      expected = [ "no" "no" "no" ];
    };
    k0sListenerOnAnyPort = {
      actual = l.listenerOnVip k0s { host = "0.0.0.0"; port = "9443"; };
      expected = true;
    };
    defaultsFillIn = {
      actual = (l.withDefaults { }).network.interface + ":" + toString (l.withDefaults { }).vip.port;
      expected = "dummyvip0:6443";
    };
    listenV4 = {
      actual = l.listenStreams v4;
      expected = [ "192.0.2.10:6443" ];
    };
    listenV6Bracketed = {
      actual = l.listenStreams v6;
      expected = [ "[2001:db8::10]:443" ];
    };
    hostPrefixes = {
      actual = map (a: a.Address) (l.network (v4 // { vip.addresses = [ "192.0.2.10" "2001:db8::10" ]; })).Address;
      expected = [ "192.0.2.10/32" "2001:db8::10/128" ];
    };
    sysctlPerUplinkOnly = {
      actual = l.sysctl v4;
      expected = {
        "net.ipv4.conf.eth0.arp_ignore" = 1;
        "net.ipv4.conf.eth0.arp_announce" = 2;
      };
    };
    sysctlDottedNameSlashForm = {
      actual = builtins.attrNames (l.sysctl v6);
      expected = [ "net/ipv4/conf/eth0.100/arp_announce" "net/ipv4/conf/eth0.100/arp_ignore" ];
    };
    sysctlNoUplinksNothing = {
      actual = l.sysctl { vip.addresses = [ "2001:db8::1" ]; };
      expected = { };
    };
    unitNamesFromFiles = {
      actual = [
        (l.netdevName { network.netdev_file = "70-x.netdev"; })
        (l.networkName { })
      ];
      expected = [ "70-x" "60-vipproxy" ];
    };
    vrrpInterfaceFirstUplink = {
      actual = l.vrrpInterface v4;
      expected = "eth0";
    };
    vrrpInterfaceExplicit = {
      actual = l.vrrpInterface v6;
      expected = "eth9";
    };
    vrrpInterfaceLoopbackVIPs = {
      actual = map l.vrrpInterface [
        { vip.addresses = [ "127.0.0.2" "::1" ]; }
        { vip.addresses = [ "0:0:0:0:0:0:0:1" ]; }
        { vip.addresses = [ "127.0.0.2" "192.0.2.10" ]; }
        { vip.addresses = [ "::10" ]; }
        { vip.addresses = [ ]; }
      ];
      expected = [ "lo" "lo" "" "" "" ];
    };
    vrrpInstanceV4 = {
      actual = l.vrrpInstance v4;
      expected = {
        interface = "eth0";
        state = "BACKUP";
        virtualRouterId = 51;
        priority = 100;
        unicastSrcIp = null;
        unicastPeers = [ ];
        virtualIps = [ { addr = "192.0.2.10/32"; dev = "eth0"; } ];
        trackScripts = [ "vipproxy_probe" ];
        extraConfig = "advert_int 1\n";
      };
    };
    vrrpOtherFamilyExcluded = {
      actual = (l.vrrpInstance (v4 // { vip.addresses = [ "192.0.2.10" "2001:db8::10" ]; })).extraConfig;
      expected = "advert_int 1\nvirtual_ipaddress_excluded {\n  2001:db8::10/128 dev eth0\n}\n";
    };
    backendOnVipPortFound = {
      actual = l.backendsOnVip v4;
      expected = [ "192.0.2.10:6443" ];
    };
    backendOnVipV6Found = {
      actual = l.backendsOnVip v6;
      expected = [ "[2001:db8::10]:443" ];
    };
    virtualServerOnVipFound = {
      actual = l.virtualServersOnVip v4 keepalivedConf;
      expected = [ "192.0.2.10 6443" ];
    };
    flagValuesBothForms = {
      actual = l.flagValues "bind-address" [
        "--cluster-cidr 10.42.0.0/16"
        "--bind-address 192.0.2.11"
        "-bind-address=192.0.2.12"
      ];
      expected = [
        "192.0.2.11"
        "192.0.2.12"
      ];
    };
    k3sListenerDefault = {
      actual = l.rancherListeners "k3s" [ ];
      expected = [
        { name = "apiserver"; host = "0.0.0.0"; port = "6443"; sharesPort = false; }
      ];
    };
    k3sListenerFromFlagString = {
      actual = map (x: "${x.host}:${x.port}") (l.rancherListeners "k3s" "--bind-address=192.0.2.11 --https-listen-port 7443");
      expected = [ "192.0.2.11:7443" ];
    };
    # RKE2's --bind-address moves its supervisor, never kube-apiserver.
    rke2ListenersDefault = {
      actual = l.rancherListeners "rke2" [ "--bind-address=192.0.2.11" ];
      expected = [
        { name = "kube-apiserver"; host = "0.0.0.0"; port = "6443"; sharesPort = false; }
        { name = "supervisor"; host = "192.0.2.11"; port = "9345"; sharesPort = false; }
      ];
    };
    rke2ListenerApiserverArgWins = {
      actual = (builtins.head (l.rancherListeners "rke2" [ "--bind-address=192.0.2.11 --kube-apiserver-arg bind-address=192.0.2.12" ])).host;
      expected = "192.0.2.12";
    };
    # permit-port-sharing: =true, alone (a bool flag), with "--"; the last one wins.
    rke2PermitPortSharing = {
      actual = map (f: (builtins.head (l.rancherListeners "rke2" f)).sharesPort) [
        [ "--kube-apiserver-arg=permit-port-sharing=true" ]
        [ "--kube-apiserver-arg permit-port-sharing" ]
        [ "--kube-apiserver-arg=--permit-port-sharing=true" ]
        [ "--kube-apiserver-arg=permit-port-sharing=true --kube-apiserver-arg=permit-port-sharing=false" ]
        [ "--kube-apiserver-arg=permit-port-sharing-x=true" ]
        [ ]
      ];
      expected = [ true true true false false false ];
    };
    # The wildcard kube-apiserver shares 6443 only with vip.reuse_port too,
    # and never on the VIP itself; the supervisor never shares.
    rke2ListenersOnVip = {
      actual =
        let
          ports = v4 // { port = [ { name = "api"; port = 6443; } { name = "supervisor"; port = 9345; } ]; };
          reuse = ports // { vip = v4.vip // { reuse_port = true; }; };
          names = s: f: map (x: x.name) (l.rancherListenersOnVip s "rke2" f);
          sharing = "--kube-apiserver-arg=permit-port-sharing=true";
        in
        [
          (names ports [ sharing ])
          (names reuse [ sharing ])
          (names reuse [ "--bind-address=192.0.2.11" ])
          (names reuse [ "--bind-address=192.0.2.11 ${sharing}" ])
          (names reuse [ "--bind-address=192.0.2.11 ${sharing} --kube-apiserver-arg=bind-address=192.0.2.10" ])
        ];
      expected = [
        [ "kube-apiserver" "supervisor" ]
        [ "supervisor" ]
        [ "kube-apiserver" ]
        [ ]
        [ "kube-apiserver" ]
      ];
    };
    listenerOnVipWildcard = {
      actual = map (l.listenerOnVip v4) [
        { host = "0.0.0.0"; port = "6443"; }
        { host = "::"; port = 6443; }
        { host = "192.0.2.10"; port = "6443"; }
        { host = "192.0.2.11"; port = "6443"; }
        { host = "0.0.0.0"; port = "7443"; }
      ];
      expected = [ true true true false false ];
    };
    virtualServerNoneInEmptyConf = {
      actual = l.virtualServersOnVip v4 "";
      expected = [ ];
    };
  };
  failed = builtins.filter (name: cases.${name}.actual != cases.${name}.expected) (builtins.attrNames cases);
in
map (name: {
  inherit name;
  inherit (cases.${name}) actual expected;
}) failed
