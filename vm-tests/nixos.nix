# NixOS VM tests (runNixOSTest), used by the flake's checks.
#
# Every vm-tests/*.py with a `# nodes: ...` header is a scenario shared with
# the Debian harness (vm-tests/run.sh): the same script runs here on NixOS
# nodes that provide what vm-tests/README.md asks of a node: the vipproxy
# binaries, the units of systemd/ (installed, not started), systemd-networkd,
# keepalived and the client tools. The script itself generates the PKI, writes
# /etc/vipproxy/vipproxy.toml and drives `vipproxy network apply`, the units
# and keepalived, exactly as on Debian.
#
# nixos-module.py instead tests the NixOS module (services.vipproxy) on its
# own declarative nodes.
{
  pkgs,
  nixosModule,
}:

let
  lib = pkgs.lib;
  vipproxy = pkgs.callPackage ../nix/package.nix { };
  # The stand-in apiserver, its own package: nodes install vipproxy alone.
  apiserver = pkgs.callPackage ../nix/apiserver.nix { inherit vipproxy; };

  # systemd/*.socket and *.service as shipped, with the paths of this system.
  units = pkgs.runCommand "vipproxy-units" { } ''
    mkdir -p $out/lib/systemd/system
    for unit in ${../systemd}/*.socket ${../systemd}/*.service; do
      sed -e 's|/usr/bin/vipproxy|${vipproxy}/bin/vipproxy|g' \
          -e 's|/bin/kill|${pkgs.coreutils}/bin/kill|g' \
          "$unit" > $out/lib/systemd/system/$(basename "$unit")
    done
  '';

  # What every node of a shared scenario has (vm-tests/README.md).
  sharedNode = {
    virtualisation.memorySize = 1024;
    virtualisation.vlans = [ 1 ];
    # The scenario opens its own ports (6443, VRRP); the Debian nodes have
    # no firewall either.
    networking.firewall.enable = false;
    # networkd reads the dummy link drop-ins `vipproxy network apply` writes
    # under /run/systemd/network; eth1 keeps the test's static addressing.
    systemd.network.enable = true;
    systemd.network.wait-online.enable = false;
    systemd.packages = [ units ];
    networking.dhcpcd.denyInterfaces = [ "dummyvip0" ];
    # No PATH for transient units here: systemd.globalEnvironment reaches
    # only the units NixOS generates, and a systemd-run unit gets systemd's
    # own bin/. The scripts pass their shell's PATH on (--setenv=PATH=$PATH,
    # checked by vm-tests/lint.py), keepalived's vrrp_script names the
    # store path (`vipproxy keepalived` renders its own executable's path),
    # and the Debian twin's manager PATH has no tools either.
    environment.systemPackages = [
      vipproxy
      apiserver
      pkgs.keepalived
      pkgs.iproute2
      pkgs.iputils
      pkgs.curl
      pkgs.ndisc6
      pkgs.procps
      pkgs.gnutar
      pkgs.gzip
      pkgs.gawk
    ];
  };

  # The `# nodes: a b c` header of a scenario script.
  nodesOf =
    script:
    let
      m = builtins.match ".*# nodes:[ ]*([a-z0-9 ]+)\n.*" (builtins.readFile script);
    in
    if m == null then null else lib.filter (n: n != "") (lib.splitString " " (builtins.head m));

  scripts = lib.filterAttrs (
    name: type:
    type == "regular"
    && lib.hasSuffix ".py" name
    # nixos-twin.py makes a Debian node NixOS-shaped (it writes under
    # /etc/systemd/system); on NixOS, nixos-module.py is the real thing.
    # neighbours.py and flood.py are Debian only: an ifupdown node and apt's
    # unit actions; a Go test binary from the Debian harness's staging disk.
    # bgp.py is Debian only too: Debian's bird2 (its bird.conf including
    # the file `vipproxy bird` writes); NixOS' BIRD comes from the module
    # (services.bird, checked by make test-nix).
    # credentials.py is Debian only: it installs the units and the
    # credentials drop-in under /etc/systemd/system as the quick start
    # does; on NixOS the module sets LoadCredential.
    && !(lib.elem name [
      "nixos-module.py"
      "lint.py"
      "nixos-twin.py"
      "neighbours.py"
      "flood.py"
      "bgp.py"
      # package.py installs the .deb on a Debian node; NixOS has the module.
      "package.py"
      "credentials.py"
      # handover.py installs a second build from the Debian harness's
      # staging disk (stage.sh's upgrade/) over the unit's binary.
      "handover.py"
    ])
  ) (builtins.readDir ./.);

  sharedTest =
    file:
    let
      name = lib.removeSuffix ".py" file;
      nodes = nodesOf (./. + "/${file}");
    in
    pkgs.testers.runNixOSTest {
      name = "vipproxy-${name}";
      nodes = lib.genAttrs nodes (_: sharedNode);
      # Lint (pyflakes) stays on; the scripts are plain Python shared with
      # the Debian harness and are not written for mypy.
      skipTypeCheck = true;
      # prelude.py first: what every script shares (the Debian driver runs
      # it before each script too).
      testScript = builtins.readFile ./prelude.py + builtins.readFile (./. + "/${file}");
    };

  sharedTests = lib.mapAttrs' (file: _: {
    name = "vm-" + lib.removeSuffix ".py" file;
    value = sharedTest file;
  }) (lib.filterAttrs (file: _: nodesOf (./. + "/${file}") != null) scripts);

  # The NixOS module test: three control-plane nodes set up declaratively.
  ip = n: "192.168.1.${toString n}";
  cpNode =
    index: priority: nftables:
    {
      imports = [
        nixosModule
        (import ./nixos-module-node.nix {
          package = vipproxy;
          inherit index priority nftables;
        })
      ];
      virtualisation.memorySize = 1024;
      # The stand-in apiserver on the node's own address (plain TCP check
      # from vipproxy; the client speaks mTLS end to end through the VIP).
      systemd.services.apiserver = {
        wantedBy = [ "multi-user.target" ];
        after = [ "network.target" ];
        serviceConfig = {
          ExecStart = "${apiserver}/bin/vipproxy-apiserver --listen ${ip index}:6443 --name cp${toString (index - 1)} --cert ${pki}/server.pem --key ${pki}/server-key.pem --client-ca ${pki}/ca.pem";
          Restart = "on-failure";
          DynamicUser = true;
        };
      };
      networking.firewall.allowedTCPPorts = [ 6443 ];
      environment.etc."vipproxy/pki".source = pki;
      environment.systemPackages = [
        pkgs.iproute2
        pkgs.curl
      ];
    };

  # Test PKI made at build time (test-only keys in the store are fine).
  pki = pkgs.runCommand "vipproxy-test-pki" { } ''
    ${apiserver}/bin/vipproxy-apiserver pki --dir $out --hosts ${ip 2},${ip 3},${ip 4},192.168.1.100
    chmod -R a+r $out
  '';

  moduleTest = pkgs.testers.runNixOSTest {
    name = "vipproxy-nixos-module";
    nodes = {
      client = {
        virtualisation.memorySize = 512;
        networking.firewall.enable = false;
        environment.systemPackages = [
          pkgs.curl
          pkgs.iputils
        ];
        environment.etc."vipproxy/pki".source = pki;
      };
      cp1 = {
        imports = [ (cpNode 2 150 false) ];
        # A settings change must reload vipproxy, not restart it.
        specialisation.fewer-backends.configuration.services.vipproxy.settings.backend = lib.mkForce [
          {
            name = "cp2";
            address = "${ip 3}:6443";
          }
          {
            name = "cp3";
            address = "${ip 4}:6443";
          }
        ];
      };
      cp2 = cpNode 3 120 false;
      # openFirewall with the nftables firewall (cp1 and cp2: iptables).
      cp3 = cpNode 4 90 true;
    };
    skipTypeCheck = true;
    testScript = builtins.readFile ./nixos-module.py;
  };
in
sharedTests // { vm-nixos-module = moduleTest; }
