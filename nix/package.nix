# vipproxy: the proxy daemon (`vipproxy`) and the stand-in apiserver used by
# the tests (`vipproxy-apiserver`).
{
  lib,
  buildGo126Module,
  version ? "dev",
}:

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
      # Tooling the stand-in apiserver (vipproxy-apiserver) links.
      ../internal
      (lib.fileset.maybeMissing ../examples)
      (lib.fileset.maybeMissing ../systemd)
      # Read by service/daemon's TestMonitoringUsesExportedMetrics.
      (lib.fileset.maybeMissing ../monitoring)
    ];
  };

  # NAR hash of `go mod vendor` for this source. Recompute with
  # `make nix-vendor-hash` after changing go.mod, go.sum or the imports;
  # `make test-nix` fails while it is stale.
  vendorHash = "sha256-ZRI3En/Q+yMjgR+w+JexA5COTSVUmBQZgPC2ucyLUuQ=";

  subPackages = [
    "cmd/vipproxy"
    "cmd/vipproxy-apiserver"
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

  # subPackages limits buildGoModule's checkPhase to the two commands; run
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
