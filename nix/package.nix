# vipproxy: the proxy daemon `vipproxy` and its man pages, what a node
# installs. The stand-in apiserver the tests run is its own package,
# nix/apiserver.nix (the same source, that command only).
{
  lib,
  buildGo126Module,
  installShellFiles,
  version ? "dev",
}:

let
  # vipproxy(8) and vipproxy.toml(5), as `make man` writes them: from the
  # command table --help prints and from docs/configuration.md.
  manGen = builtins.pathExists ../internal/mangen;
in

buildGo126Module {
  pname = "vipproxy";
  inherit version;

  # Only what the Go build and its tests read; editing docs or Nix files
  # does not rebuild the package.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../go.mod
      ../go.sum
      ../cmd
      ../service
      # The man page generator (internal/mangen) and the tooling the
      # stand-in apiserver (nix/apiserver.nix) links.
      ../internal
      # vipproxy.toml(5) is made from the configuration reference.
      (lib.fileset.maybeMissing ../docs/configuration.md)
      (lib.fileset.maybeMissing ../examples)
      # The unit files, embedded in the binary by the systemd package.
      ../systemd
      # Read by service/daemon's TestMonitoringUsesExportedMetrics.
      (lib.fileset.maybeMissing ../monitoring)
    ];
  };

  # NAR hash of `go mod vendor` for this source. Recompute with
  # `make nix-vendor-hash` after changing go.mod, go.sum or the imports;
  # `make test-nix` fails while it is stale.
  vendorHash = "sha256-RMzwzvNrKtjAl5FSklYvrGBZWa1QbMgSsN0GmJx+Mt4=";

  # Only the product: vipproxy-apiserver, -bench and -demo are test tooling.
  subPackages = [
    "cmd/vipproxy"
  ];

  # As `make build`: net/http without HTTP/2 (the admin endpoint and the
  # health checks speak HTTP/1.1), 0.35 MB less.
  tags = [ "nethttpomithttp2" ];

  ldflags = [
    "-s"
    "-w"
    "-X main.version=${version}"
  ];

  env.CGO_ENABLED = 0;

  nativeBuildInputs = [ installShellFiles ];

  # For the build platform (GOOS/GOARCH unset): when cross-compiling the
  # generator must still run here.
  postInstall = lib.optionalString manGen ''
    env -u GOOS -u GOARCH go run ./internal/mangen --out man --version ${version} --docs docs
    installManPage man/vipproxy.8 man/vipproxy.toml.5
  '';

  # subPackages limits buildGoModule's checkPhase to the command; run
  # the tests of every package instead. Inside the build sandbox there is no
  # root and no network: tests that need them skip themselves.
  checkPhase = ''
    runHook preCheck
    export GOFLAGS=''${GOFLAGS//-trimpath/}
    go test -vet=off -count=1 ./cmd/... ./service/...
    runHook postCheck
  '';

  meta = {
    description = "Socket-activated L4 proxy for a Kubernetes apiserver VIP held by keepalived";
    longDescription = ''
      vipproxy listens on the control-plane VIP on every node (the listener
      comes from systemd), balances TCP connections over the apiservers
      with health checks and transparent retry, and sets up the host so
      that only the VRRP master answers ARP for the VIP without breaking
      pod hairpin traffic.
    '';
    license = lib.licenses.asl20;
    mainProgram = "vipproxy";
    platforms = [
      "x86_64-linux"
      "aarch64-linux"
      "riscv64-linux"
    ];
  };
}
