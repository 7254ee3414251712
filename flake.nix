{
  description = "vipproxy: socket-activated L4 proxy for the Kubernetes apiserver VIP, with keepalived and ARP done right";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      lib = nixpkgs.lib;
      systems = [
        "x86_64-linux"
        "aarch64-linux"
        "riscv64-linux"
      ];
      # VM tests run where NixOS tests have KVM builders and a binary cache;
      # riscv64 runs them on demand (see docs/nixos.md).
      vmTestSystems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});

      # Same form as `make build`'s `git describe --always`: the commit.
      version = self.shortRev or self.dirtyShortRev or "dirty";

      vmTests =
        pkgs:
        import ./vm-tests/nixos.nix {
          inherit pkgs;
          nixosModule = self.nixosModules.default;
        };
    in
    {
      overlays.default = final: prev: {
        vipproxy = final.callPackage ./nix/package.nix { inherit version; };
      };

      packages = forAllSystems (
        pkgs:
        rec {
          # What a node installs: vipproxy and its man pages.
          vipproxy = pkgs.callPackage ./nix/package.nix { inherit version; };
          default = vipproxy;
          # The stand-in apiserver of the VM tests; never on a node.
          vipproxy-apiserver = pkgs.callPackage ./nix/apiserver.nix { inherit vipproxy; };
        }
        # riscv64 has no binary cache: prove the build by cross-compiling.
        // lib.optionalAttrs (pkgs.stdenv.hostPlatform.system != "riscv64-linux") {
          vipproxy-riscv64 = pkgs.pkgsCross.riscv64.callPackage ./nix/package.nix { inherit version; };
        }
      );

      # The module, with the package of this flake as its default.
      nixosModules.default =
        { lib, pkgs, ... }:
        {
          imports = [ ./nix/module.nix ];
          services.vipproxy.package =
            lib.mkDefault
              self.packages.${pkgs.stdenv.hostPlatform.system}.vipproxy;
        };

      checks = forAllSystems (
        pkgs:
        {
          package = self.packages.${pkgs.stdenv.hostPlatform.system}.vipproxy;
        }
        // lib.optionalAttrs (pkgs.stdenv.hostPlatform.system == "x86_64-linux") {
          package-riscv64 = self.packages.x86_64-linux.vipproxy-riscv64;
        }
        // lib.optionalAttrs (lib.elem pkgs.stdenv.hostPlatform.system vmTestSystems) (vmTests pkgs)
      );

      # riscv64 VM tests, built on a riscv64 builder or an emulating one
      # (boot.binfmt.emulatedSystems); not part of `nix flake check`.
      legacyPackages.riscv64-linux.vmTests = vmTests nixpkgs.legacyPackages.riscv64-linux;

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          packages = with pkgs; [
            go_1_26
            gopls
            gnumake
            git
            # make test: host, VM and Nix checks
            iproute2
            iputils
            nftables
            keepalived
            systemd
            qemu
            python3
            python3Packages.pyflakes
            nix
          ];
        };
      });

      formatter = forAllSystems (pkgs: pkgs.nixfmt);
    };
}
