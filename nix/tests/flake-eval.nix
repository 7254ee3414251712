# Evaluates flake.nix's outputs offline against a stub nixpkgs (just the
# functions the flake, nix/package.nix and vm-tests/nixos.nix call, with
# nixpkgs' semantics), so that file references, output names, the VM test
# discovery and every runNixOSTest's nodes and script are checked here. The
# NixOS module itself needs the real nixpkgs and is not evaluated.
#   nix-instantiate --eval --strict --json nix/tests/flake-eval.nix
let
  flake = import ../../flake.nix;

  lib = rec {
    genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
    elem = builtins.elem;
    filter = builtins.filter;
    optionalAttrs = cond: attrs: if cond then attrs else { };
    optionalString = cond: s: if cond then s else "";
    filterAttrs = pred: set: builtins.listToAttrs (map (n: { name = n; value = set.${n}; }) (builtins.filter (n: pred n set.${n}) (builtins.attrNames set)));
    mapAttrs' = f: set: builtins.listToAttrs (map (n: f n set.${n}) (builtins.attrNames set));
    hasSuffix = suffix: s: let n = builtins.stringLength s; m = builtins.stringLength suffix; in n >= m && builtins.substring (n - m) m s == suffix;
    removeSuffix = suffix: s: if hasSuffix suffix s then builtins.substring 0 (builtins.stringLength s - builtins.stringLength suffix) s else s;
    splitString = sep: s: builtins.filter builtins.isString (builtins.split sep s);
    licenses.asl20 = { spdxId = "Apache-2.0"; };
    fileset = {
      unions = builtins.concatMap (x: if builtins.isList x then x else [ x ]);
      maybeMissing = p: if builtins.pathExists p then [ p ] else [ ];
      toSource = { root, fileset }: builtins.seq (map (p: assert builtins.pathExists p; p) (if builtins.isList fileset then fileset else [ fileset ])) root;
    };
  };

  # A derivation that cannot be built but forces what it is given.
  fake = name: attrs: builtins.deepSeq attrs (derivation { inherit name; system = "x86_64-linux"; builder = "/bin/false"; });

  pkgsFor = system: let
    pkgs = {
      inherit lib;
      stdenv.hostPlatform.system = system;
      callPackage = f: args: let fn = import f; in fn (builtins.intersectAttrs (builtins.functionArgs fn) pkgs // args);
      buildGo126Module = a: assert builtins.isString a.vendorHash && builtins.substring 0 7 a.vendorHash == "sha256-";
        fake "${a.pname}-${a.version}" { inherit (a) subPackages ldflags env meta; src = toString a.src; postInstall = a.postInstall or ""; }
        // { inherit (a) subPackages; overrideAttrs = f: pkgs.buildGo126Module (a // f a); };
      runCommand = name: env: script: fake name { inherit env script; };
      mkShell = a: fake "shell" { n = builtins.length a.packages; };
      testers.runNixOSTest = t:
        assert builtins.isString t.testScript && t.testScript != "";
        assert builtins.all (n: builtins.elem n [ "client" "cp1" "cp2" "cp3" ]) (builtins.attrNames t.nodes);
        fake t.name { nodes = builtins.attrNames t.nodes; };
      pkgsCross.riscv64 = pkgsFor "riscv64-linux";
      coreutils = "/stub/coreutils";
    } // builtins.listToAttrs (map (n: { name = n; value = "/stub/${n}"; }) [
      "go_1_26" "gopls" "gnumake" "git" "iproute2" "iputils" "nftables" "keepalived" "systemd"
      "qemu" "python3" "nix" "nixfmt" "curl" "ndisc6" "procps" "gnutar" "gzip" "gawk" "installShellFiles"
    ]) // { python3Packages.pyflakes = "/stub/pyflakes"; };
  in pkgs;

  nixpkgs = {
    inherit lib;
    legacyPackages = lib.genAttrs [ "x86_64-linux" "aarch64-linux" "riscv64-linux" ] pkgsFor;
  };
  self = out // { shortRev = "0000000"; };
  out = flake.outputs { inherit self nixpkgs; };
  names = set: builtins.mapAttrs (_: v: v.name) set;
in
{
  packages = builtins.mapAttrs (_: builtins.mapAttrs (_: p: { inherit (p) name; subPackages = p.subPackages or null; })) out.packages;
  checks = builtins.mapAttrs (_: names) out.checks;
  riscv64VmTests = names out.legacyPackages.riscv64-linux.vmTests;
  devShells = builtins.mapAttrs (_: s: s.default.name) out.devShells;
  formatter = out.formatter;
  overlay = builtins.attrNames (out.overlays.default (pkgsFor "x86_64-linux") (pkgsFor "x86_64-linux"));
  nixosModule = builtins.isFunction out.nixosModules.default;
}
