# vipproxy-apiserver: the stand-in apiserver the VM tests run
# (vm-tests/nixos.nix), never installed on a node: the vipproxy package's
# source, build flags and vendored modules, this command only.
{ vipproxy }:

vipproxy.overrideAttrs (old: {
  pname = "vipproxy-apiserver";
  subPackages = [ "cmd/vipproxy-apiserver" ];
  # vipproxy's checkPhase runs the tests of every package already.
  doCheck = false;
  postInstall = "";
  meta = old.meta // {
    description = "Stand-in Kubernetes apiserver for vipproxy's tests";
    longDescription = ''
      Serves /readyz, /name and a `kubernetes` EndpointSlice over mTLS, and
      writes a test PKI: what vipproxy's VM tests need of an apiserver.
    '';
    mainProgram = "vipproxy-apiserver";
  };
})
