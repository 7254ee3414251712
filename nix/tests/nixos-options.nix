# The NixOS options nix/module.nix sets or reads, declared with the types,
# defaults and assertions nixpkgs gives them (transcribed from nixpkgs
# nixos/modules, 26.11 era; only the options and section fields our module
# can touch), so that `lib.evalModules` with the real nixpkgs lib rejects a
# wrong option name or type here as it would on a NixOS machine:
#   misc/assertions.nix, misc/meta.nix, config/sysctl.nix, config/system-path.nix,
#   system/etc/etc.nix, system/boot/systemd.nix + lib/systemd-unit-options.nix,
#   system/boot/networkd.nix, system/boot/resolved.nix, tasks/network-interfaces.nix,
#   services/networking/{firewall,firewall-iptables,firewall-nftables,nftables}.nix,
#   services/networking/dhcpcd.nix, services/networking/keepalived/, services/networking/bird.nix,
#   services/cluster/kubernetes/apiserver.nix, services/cluster/rancher/ (k3s, rke2).
# nixpkgs has no services.k0s (k0s comes from outside flakes): nothing to declare.
# Each module keeps nixpkgs' own config effects that matter to us: networkd
# turns systemd-resolved on by mkDefault, the nftables firewall refuses
# extraCommands, keepalived's openFirewall writes iptables commands and
# keepalived asserts on its instances.
{ lib }:
let
  inherit (lib) mkOption mkIf mkDefault types;

  # lib/systemd-lib.nix
  unitNameType = types.strMatching "[a-zA-Z0-9@%:_.\\-]+[.](service|socket|device|mount|automount|swap|target|path|timer|scope|slice)";
  # lib/systemd-unit-options.nix: any value; lists concatenate, scalars must agree.
  unitOption = lib.mkOptionType {
    name = "systemd option";
    merge =
      loc: defs:
      let
        defs' = lib.filterOverrides defs;
      in
      if lib.any (def: lib.isList def.value) defs' then
        lib.concatMap (def: lib.toList def.value) defs'
      else
        lib.mergeEqualOption loc defs';
  };
  # systemd.services.<name>.environment and systemd.globalEnvironment.
  environmentType = types.attrsOf (
    types.nullOr (
      types.oneOf [
        types.str
        types.path
        types.package
      ]
    )
  );
  boolValues = [
    true
    false
    "yes"
    "no"
  ];

  # lib/systemd-lib.nix checkUnitConfig and its assertions: a section is
  # valid when every check passes (errors are traced, the check is false).
  # Applied to the raw definition, so (as in nixpkgs) mkOverride/mkIf
  # wrappers are taken off each value first.
  checkUnitConfig =
    group: checks: attrs:
    let
      defs = lib.mapAttrs (
        _: v: if builtins.elem (v._type or "") [ "override" "if" ] then v.content else v
      ) attrs;
      errors = lib.concatMap (c: c group defs) checks;
    in
    if errors == [ ] then true else builtins.trace (lib.concatStringsSep "\n" errors) false;
  assertOnlyFields =
    fields: group: attrs:
    map (f: "Systemd ${group} field `${f}' is not recognised.") (
      lib.filter (f: !lib.elem f fields) (lib.attrNames attrs)
    );
  assertHasField =
    name: group: attrs:
    lib.optional (!(attrs ? ${name})) "Systemd ${group} field `${name}' must exist.";
  assertValueOneOf =
    name: values: group: attrs:
    lib.optional (
      attrs ? ${name} && !lib.elem attrs.${name} values
    ) "Systemd ${group} field `${name}' cannot have value `${toString attrs.${name}}'.";
  checked = check: types.addCheck (types.attrsOf unitOption) check;

  # networkd.nix check.netdev / check.network (fields cut to those a dummy
  # link and its addresses use; the value checks as in nixpkgs).
  checkNetdev = checkUnitConfig "Netdev" [
    (assertOnlyFields [
      "Description"
      "Name"
      "Kind"
      "MTUBytes"
      "MACAddress"
    ])
    (assertHasField "Name")
    (assertHasField "Kind")
    (assertValueOneOf "Kind" [
      "bond"
      "bridge"
      "dummy"
      "veth"
      "vlan"
      "vxlan"
      "wireguard"
    ])
  ];
  # networkd.nix check.global.sectionNetwork (networkd.conf [Network]).
  checkGlobalNetwork = checkUnitConfig "Network" [
    (assertOnlyFields [
      "SpeedMeter"
      "SpeedMeterIntervalSec"
      "ManageForeignRoutingPolicyRules"
      "ManageForeignRoutes"
      "ManageForeignNextHops"
      "RouteTable"
      "IPv6PrivacyExtensions"
      "IPv4Forwarding"
      "IPv6Forwarding"
    ])
    (assertValueOneOf "SpeedMeter" boolValues)
    (assertValueOneOf "ManageForeignRoutingPolicyRules" boolValues)
    (assertValueOneOf "ManageForeignRoutes" boolValues)
    (assertValueOneOf "ManageForeignNextHops" boolValues)
  ];
  checkNetwork = checkUnitConfig "Network" [
    (assertOnlyFields [
      "Description"
      "DHCP"
      "LinkLocalAddressing"
      "IPv6AcceptRA"
      "ConfigureWithoutCarrier"
      "IgnoreCarrierLoss"
      "KeepConfiguration"
      "Address"
      "Gateway"
      "DNS"
    ])
    (assertValueOneOf "LinkLocalAddressing" (
      boolValues
      ++ [
        "ipv4"
        "ipv6"
        "fallback"
        "ipv4-fallback"
      ]
    ))
    (assertValueOneOf "ConfigureWithoutCarrier" boolValues)
  ];
  checkAddress = checkUnitConfig "Address" [
    (assertOnlyFields [
      "Address"
      "Peer"
      "Broadcast"
      "Label"
      "PreferredLifetime"
      "Scope"
      "RouteMetric"
      "HomeAddress"
      "DuplicateAddressDetection"
      "ManageTemporaryAddress"
      "AddPrefixRoute"
      "AutoJoin"
    ])
    (assertHasField "Address")
    (assertValueOneOf "DuplicateAddressDetection" [
      "ipv4"
      "ipv6"
      "both"
      "none"
    ])
  ];
  checkNetworkLink = checkUnitConfig "Link" [
    (assertOnlyFields [
      "MACAddress"
      "MTUBytes"
      "ARP"
      "Multicast"
      "AllMulticast"
      "Unmanaged"
      "Group"
      "RequiredForOnline"
      "RequiredFamilyForOnline"
      "ActivationPolicy"
      "Promiscuous"
    ])
    (assertValueOneOf "RequiredForOnline" (
      boolValues
      ++ [
        "missing"
        "off"
        "no-carrier"
        "dormant"
        "degraded-carrier"
        "carrier"
        "degraded"
        "enslaved"
        "routable"
      ]
    ))
  ];
  # lib/systemd-unit-options.nix checkService.
  checkService = checkUnitConfig "Service" [
    (assertValueOneOf "Type" [
      "exec"
      "simple"
      "forking"
      "oneshot"
      "dbus"
      "notify"
      "notify-reload"
      "idle"
    ])
    (assertValueOneOf "Restart" [
      "no"
      "on-success"
      "on-failure"
      "on-abnormal"
      "on-abort"
      "always"
    ])
  ];

  # lib/systemd-unit-options.nix: the [Unit]/[Install] options every unit has.
  commonUnitOptions = {
    enable = opt types.bool true;
    description = opt types.singleLineStr "";
    documentation = opt (types.listOf types.str) [ ];
    requires = opt (types.listOf unitNameType) [ ];
    wants = opt (types.listOf unitNameType) [ ];
    partOf = opt (types.listOf unitNameType) [ ];
    after = opt (types.listOf unitNameType) [ ];
    before = opt (types.listOf unitNameType) [ ];
    wantedBy = opt (types.listOf unitNameType) [ ];
    requiredBy = opt (types.listOf unitNameType) [ ];
    unitConfig = opt (types.attrsOf unitOption) { };
  };
  serviceOptions = commonUnitOptions // {
    serviceConfig = opt (checked checkService) { };
    # systemd-unit-options.nix serviceOptions: what switch-to-configuration
    # does with a changed unit (X-RestartIfChanged=, X-StopIfChanged=, ...).
    restartIfChanged = opt types.bool true;
    reloadIfChanged = opt types.bool false;
    stopIfChanged = opt types.bool true;
    notSocketActivated = opt types.bool false;
    restartTriggers = opt (types.listOf unitOption) [ ];
    reloadTriggers = opt (types.listOf unitOption) [ ];
    path = opt (types.listOf (types.either types.package types.str)) [ ];
    environment = opt environmentType { };
  };
  socketOptions = commonUnitOptions // {
    listenStreams = opt (types.listOf types.str) [ ];
    listenDatagrams = opt (types.listOf types.str) [ ];
    socketConfig = opt (types.attrsOf unitOption) { };
  };

  # networkd.nix netdevOptions / networkOptions (the sections a dummy link uses).
  netdevOptions = {
    enable = opt types.bool true;
    netdevConfig = opt (checked checkNetdev) { };
  };
  networkOptions = {
    enable = opt types.bool true;
    matchConfig = opt (types.attrsOf unitOption) { };
    networkConfig = opt (checked checkNetwork) { };
    # mkSubsectionType "addressConfig" check.network.sectionAddress: the
    # [Address] fields directly (the addressConfig wrapper is deprecated).
    addresses = opt (types.listOf (checked checkAddress)) [ ];
    linkConfig = opt (checked checkNetworkLink) { };
    address = opt (types.listOf types.str) [ ];
    name = opt (types.nullOr types.str) null;
  };

  # services/networking/keepalived/vrrp-script-options.nix
  vrrpScriptOptions = {
    script = mkOption { type = types.str; };
    interval = opt types.int 1;
    timeout = opt types.int 5;
    weight = opt types.int 0;
    rise = opt types.int 5;
    fall = opt types.int 3;
    user = opt types.str "keepalived_script";
    group = opt (types.nullOr types.str) null;
    extraConfig = opt types.lines "";
  };
  # .../virtual-ip-options.nix
  virtualIpOptions = {
    addr = mkOption { type = types.str; };
    brd = opt (types.nullOr types.str) null;
    dev = opt (types.nullOr types.str) null;
    scope = opt (types.nullOr types.str) null;
    label = opt (types.nullOr types.str) null;
  };
  # .../vrrp-instance-options.nix
  vrrpInstanceOptions = {
    interface = mkOption { type = types.str; };
    state = mkOption {
      type = types.enum [
        "MASTER"
        "BACKUP"
      ];
      default = "BACKUP";
    };
    virtualRouterId = mkOption { type = types.ints.between 1 255; };
    priority = opt types.int 100;
    noPreempt = opt types.bool false;
    useVmac = opt types.bool false;
    vmacInterface = opt (types.nullOr types.str) null;
    vmacXmitBase = opt types.bool false;
    unicastSrcIp = opt (types.nullOr types.str) null;
    unicastPeers = opt (types.listOf types.str) [ ];
    virtualIps = opt (types.listOf (types.submodule { options = virtualIpOptions; })) [ ];
    trackScripts = opt (types.listOf types.str) [ ];
    trackInterfaces = opt (types.listOf types.str) [ ];
    extraConfig = opt types.lines "";
  };

  # An option of type and default, as most of those below are declared.
  opt = type: default: mkOption { inherit type default; };
  bool = opt types.bool;
  lines = opt types.lines "";
in
{
  # misc/assertions.nix, misc/meta.nix, system/etc/etc.nix, config/system-path.nix
  base =
    { ... }:
    {
      options = {
        assertions = mkOption {
          type = types.listOf types.unspecified;
          internal = true;
          default = [ ];
        };
        warnings = mkOption {
          type = types.listOf types.str;
          internal = true;
          default = [ ];
        };
        meta.maintainers = opt (types.listOf types.raw) [ ];
        environment.systemPackages = opt (types.listOf types.package) [ ];
        environment.etc = mkOption {
          default = { };
          type = types.attrsOf (
            types.submodule {
              options = {
                enable = bool true;
                source = mkOption { type = types.path; };
                mode = opt types.str "symlink";
              };
            }
          );
        };
        # config/sysctl.nix (its highest-value merge for net.core.{r,w}mem_max
        # left out). sysctlOption takes one definition per key at the highest
        # priority: two plain definitions of a key throw, even equal ones.
        boot.kernel.sysctl = mkOption {
          default = { };
          type = types.submodule {
            freeformType = types.attrsOf (
              lib.mkOptionType {
                name = "sysctl option value";
                check =
                  val:
                  let
                    checkType = x: lib.isBool x || lib.isString x || lib.isInt x || x == null;
                  in
                  checkType val || (val._type or "" == "override" && checkType val.content);
                merge = loc: defs: lib.mergeOneOption loc (lib.filterOverrides defs);
              }
            );
          };
        };
      };
    };

  # system/boot/systemd.nix
  systemd =
    { ... }:
    {
      options.systemd = {
        services = opt (types.attrsOf (types.submodule { options = serviceOptions; })) { };
        sockets = opt (types.attrsOf (types.submodule { options = socketOptions; })) { };
        globalEnvironment = opt environmentType { };
      };
    };

  # system/boot/networkd.nix, system/boot/resolved.nix, tasks/network-interfaces.nix,
  # services/networking/dhcpcd.nix
  networkd =
    { config, ... }:
    {
      options = {
        systemd.network = {
          enable = bool false;
          netdevs = opt (types.attrsOf (types.submodule { options = netdevOptions; })) { };
          networks = opt (types.attrsOf (types.submodule { options = networkOptions; })) { };
          # networkd.nix: config = submodule [ { options = networkdOptions; } networkdConfig ]
          config.networkConfig = opt (checked checkGlobalNetwork) { };
          wait-online.enable = bool true;
          wait-online.anyInterface = bool config.networking.useDHCP;
        };
        services.resolved.enable = bool false;
        networking.useNetworkd = bool false;
        networking.useDHCP = bool true;
        networking.dhcpcd.denyInterfaces = opt (types.listOf types.str) [ ];
      };
      config = lib.mkMerge [
        (mkIf config.networking.useNetworkd { systemd.network.enable = mkDefault true; })
        # networkd.nix: "services.resolved.enable = mkDefault true;"
        (mkIf config.systemd.network.enable { services.resolved.enable = mkDefault true; })
      ];
    };

  # services/networking/firewall.nix, firewall-iptables.nix, firewall-nftables.nix,
  # nftables.nix, firewalld (its enable only)
  firewall =
    { config, ... }:
    let
      cfg = config.networking.firewall;
    in
    {
      options = {
        services.firewalld.enable = bool false;
        networking.nftables = {
          enable = bool false;
          rulesetFile = opt (types.nullOr types.path) null;
        };
        networking.firewall = {
          enable = bool true;
          backend = mkOption {
            type = types.enum [
              "iptables"
              "nftables"
              "firewalld"
            ];
            default =
              if config.services.firewalld.enable then
                "firewalld"
              else if config.networking.nftables.enable then
                "nftables"
              else
                "iptables";
          };
          allowedTCPPorts = mkOption {
            type = types.listOf types.port;
            default = [ ];
            apply = ports: lib.unique (builtins.sort builtins.lessThan ports);
          };
          allowedUDPPorts = mkOption {
            type = types.listOf types.port;
            default = [ ];
            apply = ports: lib.unique (builtins.sort builtins.lessThan ports);
          };
          trustedInterfaces = opt (types.listOf types.str) [ ];
          extraCommands = lines;
          extraStopCommands = lines;
          extraInputRules = lines;
          extraForwardRules = lines;
        };
      };
      config = mkIf (cfg.enable && cfg.backend == "nftables") {
        assertions = [
          {
            assertion = cfg.extraCommands == "";
            message = "extraCommands is incompatible with the nftables based firewall: ${cfg.extraCommands}";
          }
          {
            assertion = cfg.extraStopCommands == "";
            message = "extraStopCommands is incompatible with the nftables based firewall: ${cfg.extraStopCommands}";
          }
          {
            assertion = config.networking.nftables.rulesetFile == null;
            message = "networking.nftables.rulesetFile conflicts with the firewall";
          }
        ];
      };
    };

  # services/networking/keepalived/default.nix
  keepalived =
    { config, ... }:
    let
      cfg = config.services.keepalived;
      instanceAssertions =
        name: i:
        [
          {
            assertion = i.interface != "";
            message = "services.keepalived.vrrpInstances.${name}.interface option cannot be empty.";
          }
          {
            assertion = i.virtualRouterId >= 0 && i.virtualRouterId <= 255;
            message = "services.keepalived.vrrpInstances.${name}.virtualRouterId must be an integer between 0..255.";
          }
          {
            assertion = i.priority >= 0 && i.priority <= 255;
            message = "services.keepalived.vrrpInstances.${name}.priority must be an integer between 0..255.";
          }
        ]
        ++ map (ip: {
          assertion = ip.addr != "";
          message = "The 'addr' option for an services.keepalived.vrrpInstances.${name}.virtualIps entry cannot be empty.";
        }) i.virtualIps
        ++ map (script: {
          assertion = cfg.vrrpScripts ? ${script};
          message = "services.keepalived.vrrpInstances.${name} trackscript ${script} is not defined in services.keepalived.vrrpScripts.";
        }) i.trackScripts;
    in
    {
      options.services.keepalived = {
        enable = bool false;
        openFirewall = bool false;
        enableScriptSecurity = bool false;
        vrrpScripts = opt (types.attrsOf (types.submodule { options = vrrpScriptOptions; })) { };
        vrrpInstances = opt (types.attrsOf (types.submodule { options = vrrpInstanceOptions; })) { };
        extraGlobalDefs = lines;
        extraConfig = lines;
        secretFile = opt (types.nullOr types.path) null;
      };
      config = mkIf cfg.enable {
        assertions = lib.concatLists (lib.mapAttrsToList instanceAssertions cfg.vrrpInstances);
        networking.firewall = mkIf cfg.openFirewall {
          extraCommands = ''
            ip46tables -A nixos-fw -p vrrp -m comment --comment "services.keepalived.openFirewall" -j ACCEPT
            ip46tables -A nixos-fw -p ah -m comment --comment "services.keepalived.openFirewall" -j ACCEPT
          '';
          extraStopCommands = ''
            ip46tables -D nixos-fw -p vrrp -m comment --comment "services.keepalived.openFirewall" -j ACCEPT
            ip46tables -D nixos-fw -p ah -m comment --comment "services.keepalived.openFirewall" -j ACCEPT
          '';
        };
      };
    };

  # services/cluster/rancher/{default,k3s,rke2}.nix (mkRancherModule): the
  # options that decide how a k3s or RKE2 server starts, with nixpkgs' types
  # and defaults, and the unit's command line built from them as nixpkgs
  # builds it (manifests, charts, images and kubelet config left out).
  rancher =
    { config, ... }:
    let
      rancherOptions = name: {
        enable = lib.mkEnableOption name;
        role = mkOption {
          type = types.enum [
            "server"
            "agent"
          ];
          default = "server";
        };
        serverAddr = opt types.str "";
        token = opt types.str "";
        tokenFile = opt (types.nullOr types.path) null;
        agentToken = opt types.str "";
        agentTokenFile = opt (types.nullOr types.path) null;
        extraFlags = opt (with types; either str (listOf str)) [ ];
        environmentFile = opt (types.nullOr types.path) null;
        configPath = opt (types.nullOr types.path) null;
        disable = opt (types.listOf types.str) [ ];
        nodeName = opt (types.nullOr types.str) null;
        nodeLabel = opt (types.listOf types.str) [ ];
        nodeTaint = opt (types.listOf types.str) [ ];
        nodeIP = opt (types.nullOr types.str) null;
        nodeExternalIP = opt (types.nullOr types.str) null;
        selinux = bool false;
      };
      rancherUnit =
        name: extraBinFlags:
        let
          cfg = config.services.${name};
        in
        {
          description = "${name} service";
          after = [
            "firewall.service"
            "network-online.target"
          ];
          wants = [
            "firewall.service"
            "network-online.target"
          ];
          wantedBy = [ "multi-user.target" ];
          serviceConfig = {
            Type = if cfg.role == "agent" then "exec" else "notify";
            KillMode = "process";
            Delegate = "yes";
            Restart = "always";
            RestartSec = "5s";
            ExecStart = lib.concatStringsSep " \\\n " (
              [ "/nix/store/00000000000000000000000000000000-${name}/bin/${name} ${cfg.role}" ]
              ++ (lib.optional (cfg.serverAddr != "") "--server ${cfg.serverAddr}")
              ++ (lib.optional (cfg.tokenFile != null) "--token-file ${cfg.tokenFile}")
              ++ (lib.optional (cfg.configPath != null) "--config ${cfg.configPath}")
              ++ (map (d: "--disable=${d}") cfg.disable)
              ++ (lib.optional (cfg.nodeIP != null) "--node-ip=${cfg.nodeIP}")
              ++ extraBinFlags
              ++ (lib.flatten cfg.extraFlags)
            );
          };
        };
      k3s = config.services.k3s;
      rke2 = config.services.rke2;
    in
    {
      options.services.k3s = rancherOptions "k3s" // {
        clusterInit = bool false;
        disableAgent = bool false;
      };
      options.services.rke2 = rancherOptions "rke2" // {
        cni = mkOption {
          type = types.nullOr (
            types.enum [
              "none"
              "canal"
              "cilium"
              "calico"
              "flannel"
            ]
          );
          default = null;
        };
        cisHardening = bool false;
      };
      config = lib.mkMerge [
        (mkIf k3s.enable {
          assertions = [
            {
              assertion = k3s.role == "agent" -> !k3s.disableAgent;
              message = "k3s: disableAgent must be false if role is 'agent'";
            }
            {
              assertion = k3s.role == "agent" -> !k3s.clusterInit;
              message = "k3s: clusterInit must be false if role is 'agent'";
            }
          ];
          systemd.services.k3s = rancherUnit "k3s" (
            (lib.optional k3s.clusterInit "--cluster-init") ++ (lib.optional k3s.disableAgent "--disable-agent")
          );
        })
        (mkIf rke2.enable {
          systemd.services."rke2-${rke2.role}" = rancherUnit "rke2" (
            lib.optional (rke2.cni != null) "--cni=${rke2.cni}"
          );
        })
      ];
    };

  # services/networking/bird.nix (26.11: services.bird, bird3 by default;
  # services.bird2 and services.bird6 are removed options). Its config
  # effects that matter here: /etc/bird/bird.conf from `config` (checked
  # with `bird -p` at build time) and the bird unit.
  bird =
    { config, pkgs, ... }:
    let
      cfg = config.services.bird;
    in
    {
      imports = [
        (lib.mkRemovedOptionModule [ "services" "bird2" ]
          "Use services.bird instead. bird3 is the new default bird package. You can choose to remain with bird2 by setting the service.bird.package option."
        )
        (lib.mkRemovedOptionModule [ "services" "bird6" ] "Use services.bird instead")
      ];
      options.services.bird = {
        enable = lib.mkEnableOption "BIRD Internet Routing Daemon";
        package = opt types.package pkgs.bird3;
        config = mkOption { type = types.lines; };
        autoReload = bool true;
        checkConfig = bool true;
        preCheckConfig = lines;
      };
      config = mkIf cfg.enable {
        environment.systemPackages = [ cfg.package ];
        systemd.services.bird = {
          description = "BIRD Internet Routing Daemon";
          wantedBy = [ "multi-user.target" ];
          serviceConfig = {
            Type = "forking";
            Restart = "on-failure";
            User = "bird";
            Group = "bird";
          };
        };
      };
    };

  # services/cluster/kubernetes/apiserver.nix (the listener options)
  kubernetes =
    { ... }:
    {
      options.services.kubernetes.apiserver = {
        enable = lib.mkEnableOption "Kubernetes apiserver";
        bindAddress = opt types.str "0.0.0.0";
        securePort = opt types.int 6443;
        advertiseAddress = opt (types.nullOr types.str) null;
      };
    };
}
