# Evaluates nix/module.nix offline with a fake `lib` and `pkgs`, for a
# machine without the real nixpkgs lib: option types and merging are NOT checked here
# (nixos-eval.nix does that with the real nixpkgs lib when it is present). What is checked: the module's own code evaluates (options
# and config), what it sets for a given config, and that each assertion
# fires for the input it guards against and only then. Evaluates to the
# number of expectations and the names of the failing ones:
#   nix-instantiate --eval --strict --json nix/tests/module-eval.nix
let
  # mkIf / mkMerge / mkDefault / mkForce as markers, resolved below.
  fakeLib = rec {
    mkOption = attrs: attrs // { _type = "option"; };
    mkEnableOption = name: mkOption { default = false; description = "Whether to enable ${name}."; };
    mkPackageOption = pkgs: name: _: mkOption { default = pkgs.${name} or null; };
    literalExpression = text: { _type = "literalExpression"; inherit text; };
    types = {
      str = "str";
      bool = "bool";
      port = "port";
      nullOr = t: { nullOr = t; };
      strMatching = re: { strMatching = re; };
      listOf = t: { listOf = t; };
      nonEmptyListOf = t: { nonEmptyListOf = t; };
      submodule = m: { submodule = m; };
      ints.between = lo: hi: { between = [ lo hi ]; };
      enum = values: { enum = values; };
    };
    mkIf = condition: content: { _type = "if"; inherit condition content; };
    mkMerge = contents: { _type = "merge"; inherit contents; };
    mkDefault = content: { _type = "override"; priority = 1000; inherit content; };
    mkForce = mkDefault;
    getExe = p: "${p}/bin/vipproxy";
    concatStringsSep = builtins.concatStringsSep;
    concatMap = builtins.concatMap;
    concatMapStrings = f: list: builtins.concatStringsSep "" (map f list);
    boolToString = b: if b then "true" else "false";
    any = builtins.any;
    all = builtins.all;
    elem = builtins.elem;
    mapAttrsToList = f: attrs: map (n: f n attrs.${n}) (builtins.attrNames attrs);
    hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;
  };

  fakePkgs = {
    vipproxy = "/nix/store/fake-vipproxy";
    coreutils = "/nix/store/fake-coreutils";
    formats.toml = _: {
      type = "toml";
      generate = name: value: builtins.deepSeq value "/nix/store/fake-${name}";
    };
  };

  isMarker = v: builtins.isAttrs v && v ? _type;
  # Resolve the markers into plain values: false mkIf becomes null (dropped),
  # mkMerge merges attribute sets recursively and concatenates lists.
  resolve =
    v:
    if isMarker v && v._type == "if" then
      (if v.condition then resolve v.content else null)
    else if isMarker v && v._type == "override" then
      resolve v.content
    else if isMarker v && v._type == "merge" then
      builtins.foldl' merge { } (builtins.filter (x: x != null) (map resolve v.contents))
    else if builtins.isAttrs v && !(v ? outPath) then
      let
        resolved = builtins.mapAttrs (_: resolve) v;
      in
      builtins.removeAttrs resolved (builtins.filter (n: resolved.${n} == null) (builtins.attrNames resolved))
    else
      v;
  merge =
    a: b:
    if builtins.isAttrs a && builtins.isAttrs b then
      a // builtins.mapAttrs (n: bv: if a ? ${n} then merge a.${n} bv else bv) b
    else if builtins.isList a && builtins.isList b then
      a ++ b
    else
      b;

  # The settings as the module system would hand them over: declared
  # sub-options filled with their defaults.
  withOptionDefaults =
    settings:
    settings
    // {
      vip = { port = if (settings.port or [ ]) == [ ] then 6443 else null; reuse_port = false; } // settings.vip;
      port = settings.port or [ ];
      network = {
        interface = "dummyvip0";
        uplinks = [ ];
      } // (settings.network or { });
      keepalived = {
        router_id = 51;
        priority = 100;
      } // (settings.keepalived or { });
      backend = map (b: { name = b.address; } // b) (settings.backend or [ ]);
    };

  evalWith =
    {
      settings,
      keepalivedExtraConfig ? "",
      openFirewall ? false,
      nftables ? false,
      kubeApiserver ? { enable = false; },
      discoveryCredentials ? { },
    }:
    let
      module = import ../module.nix {
        lib = fakeLib;
        pkgs = fakePkgs;
        config = {
          services.vipproxy = {
            enable = true;
            package = fakePkgs.vipproxy;
            settings = withOptionDefaults settings;
            inherit openFirewall discoveryCredentials;
            keepalived.enable = true;
          };
          services.keepalived.extraConfig = keepalivedExtraConfig;
          services.kubernetes.apiserver = {
            bindAddress = "0.0.0.0";
            securePort = 6443;
          } // kubeApiserver;
          networking.useNetworkd = false;
          networking.nftables.enable = nftables;
          # The module's own networks only (its definition is not merged back here).
          systemd.network.networks = { };
          # The module's own uplink sysctls, as merged (nixos-eval.nix checks an
          # operator's definitions beside them).
          boot.kernel.sysctl = (import ../lib.nix).sysctl settings;
        };
        # services.resolved.enable set by the operator (a plain definition).
        options.services.resolved.enable.highestPrio = 100;
      };
    in
    {
      options = module.options;
      config = resolve module.config;
    };

  good = {
    vip.addresses = [
      "192.168.1.100"
      "2001:db8:1::100"
    ];
    backend = [
      { address = "192.168.1.2:6443"; }
      { address = "192.168.1.3:6443"; name = "cp2"; }
    ];
    network.uplinks = [ "eth1" ];
    keepalived.priority = 150;
  };
  k0s = good // {
    backend = [ { address = "192.168.1.2"; } ];
    port = [
      { name = "api"; port = 6443; }
      { name = "konnectivity"; port = 8132; health.type = "tls"; }
      { name = "join"; port = 9443; }
    ];
  };
  ok = evalWith {
    settings = good;
    openFirewall = true;
  };
  c = ok.config;

  # The messages of the assertions that fail for these settings.
  failing = args: map (a: a.message) (builtins.filter (a: !a.assertion) (evalWith args).config.assertions);
  firesOnce =
    args: word:
    let
      f = failing args;
    in
    builtins.length f == 1 && builtins.match ".*${word}.*" (builtins.head f) != null;

  cases = {
    optionsEvaluate = builtins.deepSeq (builtins.attrNames ok.options.services.vipproxy) true;
    backendNameDefaultsToAddress =
      let
        backend = ((ok.options.services.vipproxy.settings.type.submodule { config.port = [ ]; }).options.backend.type.listOf.submodule {
          config.address = "10.0.0.1:6443";
        });
      in
      backend.options.name.default == "10.0.0.1:6443";
    goodConfigPassesAllAssertions = failing { settings = good; } == [ ];
    configFileAtUsualPath = c.environment.etc."vipproxy/vipproxy.toml".source == "/nix/store/fake-vipproxy.toml";
    socketListens = c.systemd.sockets.vipproxy.listenStreams == [ "192.168.1.100:6443" "[2001:db8:1::100]:6443" ];
    socketNamedVip = c.systemd.sockets.vipproxy.socketConfig.FileDescriptorName == "vip";
    onePortOneSocket = builtins.attrNames c.systemd.sockets == [ "vipproxy" ] && c.systemd.sockets.vipproxy.wants == [ ];
    # k0s: three ports, a socket unit each; the first is vipproxy.socket.
    k0sSocketPerPort =
      let
        k = (evalWith { settings = k0s; openFirewall = true; }).config;
        konn = k.systemd.sockets."vipproxy-port@konnectivity";
      in
      builtins.attrNames k.systemd.sockets == [ "vipproxy" "vipproxy-port@join" "vipproxy-port@konnectivity" ]
      && k.systemd.sockets.vipproxy.socketConfig.FileDescriptorName == "api"
      && k.systemd.sockets.vipproxy.listenStreams == [ "192.168.1.100:6443" "[2001:db8:1::100]:6443" ]
      && k.systemd.sockets.vipproxy.wants == [ "vipproxy-port@join.socket" "vipproxy-port@konnectivity.socket" ]
      && konn.socketConfig.FileDescriptorName == "konnectivity"
      && konn.socketConfig.Service == "vipproxy.service"
      && konn.partOf == [ "vipproxy.socket" ]
      && konn.listenStreams == [ "192.168.1.100:8132" "[2001:db8:1::100]:8132" ]
      && k.networking.firewall.allowedTCPPorts == [ 6443 8132 9443 ];
    serviceReadsUsualPath =
      c.systemd.services.vipproxy.serviceConfig.ExecStart
      == "/nix/store/fake-vipproxy/bin/vipproxy serve --config /etc/vipproxy/vipproxy.toml";
    serviceHardened = c.systemd.services.vipproxy.serviceConfig.DynamicUser == "yes";
    settingsChangeReloads = c.systemd.services.vipproxy.reloadTriggers == [ "/nix/store/fake-vipproxy.toml" ];
    networkdOn = c.systemd.network.enable;
    dummyNetdev = c.systemd.network.netdevs."60-vipproxy".netdevConfig == { Name = "dummyvip0"; Kind = "dummy"; };
    vipAddresses =
      map (a: a.Address) c.systemd.network.networks."60-vipproxy".addresses == [ "192.168.1.100/32" "2001:db8:1::100/128" ];
    waitOnlineOffWithScriptedNetworking = c.systemd.network.wait-online.enable == false;
    # networkd runs for dummyvip0 alone here: it keeps a CNI's rules and routes.
    networkdKeepsForeignRulesAndRoutes = c.systemd.network.config.networkConfig == {
      ManageForeignRoutingPolicyRules = "no";
      ManageForeignRoutes = "no";
    };
    # nixos-rebuild switch with a new package restarts the service alone:
    # the socket (and its queue) stays, no connection is refused.
    packageChangeRestartsServiceAlone =
      c.systemd.services.vipproxy.stopIfChanged == false && c.systemd.services.vipproxy.restartIfChanged;
    sysctlUplinkOnly = c.boot.kernel.sysctl == {
      "net.ipv4.conf.eth1.arp_ignore" = 1;
      "net.ipv4.conf.eth1.arp_announce" = 2;
    };
    firewallOpen = c.networking.firewall.allowedTCPPorts == [ 6443 ];
    vrrpThroughIptables =
      builtins.match ".*ip46tables -A nixos-fw -p 112 .*" c.networking.firewall.extraCommands != null
      && !(c.networking.firewall ? extraInputRules)
      && !(c.services.keepalived ? openFirewall);
    vrrpThroughNftables =
      let
        nft = (evalWith { settings = good; openFirewall = true; nftables = true; }).config;
      in
      builtins.match ".*meta l4proto 112 accept.*" nft.networking.firewall.extraInputRules != null
      && !(nft.networking.firewall ? extraCommands);
    assertApiserverOnWildcard = firesOnce {
      settings = good;
      kubeApiserver.enable = true;
    } "services.kubernetes.apiserver.bindAddress";
    apiserverOnNodeAddressFits =
      failing {
        settings = good;
        kubeApiserver = { enable = true; bindAddress = "192.168.1.2"; };
      } == [ ];
    serviceUnitAsShipped =
      c.systemd.services.vipproxy.after == [ "vipproxy.socket" ] && !(c.systemd.services.vipproxy ? wants);
    firewallClosedByDefault = !((evalWith { settings = good; }).config.networking.firewall ? allowedTCPPorts);
    keepalivedInstance =
      c.services.keepalived.vrrpInstances.vipproxy.priority == 150
      && c.services.keepalived.vrrpInstances.vipproxy.virtualIps == [ { addr = "192.168.1.100/32"; dev = "eth1"; } ];
    keepalivedProbe =
      c.services.keepalived.vrrpScripts.vipproxy_probe.script
      == "/nix/store/fake-vipproxy/bin/vipproxy probe --config /etc/vipproxy/vipproxy.toml";
    assertVirtualServer = firesOnce {
      settings = good;
      keepalivedExtraConfig = "virtual_server 192.168.1.100 6443 {\n}\n";
    } "IPVS";
    assertVirtualServerOtherPortAllowed =
      failing {
        settings = good;
        keepalivedExtraConfig = "virtual_server 192.168.1.100 80 {\n}\n";
      } == [ ];
    assertIPv4NeedsUplink = builtins.length (failing { settings = good // { network.uplinks = [ ]; }; }) == 2;
    assertIPv6OnlyWithInterface =
      failing {
        settings = good // {
          vip.addresses = [ "2001:db8:1::100" ];
          network.uplinks = [ ];
          keepalived.interface = "eth1";
        };
      } == [ ];
    assertBackendOnVip = firesOnce {
      settings = good // { backend = [ { address = "192.168.1.100:6443"; } ]; };
    } "connect to itself";
    assertNoBackends = firesOnce { settings = good // { backend = [ ]; }; } "backend is empty";
    discoveryCredentialsLoaded =
      let
        dc = (evalWith { settings = good; discoveryCredentials = { ca_file = "/etc/kubernetes/pki/ca.crt"; }; }).config;
      in
      dc.systemd.services.vipproxy.serviceConfig.LoadCredential == [ "ca_file:/etc/kubernetes/pki/ca.crt" ]
      && dc.services.vipproxy.settings.discovery.ca_file == "/run/credentials/vipproxy.service/ca_file";
    assertDiscoveryCredentialName = firesOnce {
      settings = good;
      discoveryCredentials = { ca = "/etc/kubernetes/pki/ca.crt"; };
    } "may name only";
    assertUplinkAll = firesOnce { settings = good // { network.uplinks = [ "all" ]; }; } "hairpin";
  };
in
{
  count = builtins.length (builtins.attrNames cases);
  failed = builtins.filter (name: cases.${name} != true) (builtins.attrNames cases);
}
