# What services.vipproxy sets on node cpN of the NixOS module test
# (vm-tests/nixos.nix, check vm-nixos-module). A file of its own so that
# `make test-nix` evaluates these very nodes with the real nixpkgs lib
# (nix/tests/nixos-eval.nix): a node that fails one of the module's
# assertions fails here, not only on a Nix machine.
{
  package,
  index,
  priority,
  nftables ? false,
}:
let
  ip = n: "192.168.1.${toString n}";
in
{
  # Scripted networking (the test driver's default): the module asks which
  # DNS the node keeps instead of letting networkd switch it.
  services.resolved.enable = false;
  # openFirewall with the nftables firewall on one node, iptables on the others.
  networking.nftables.enable = nftables;
  services.vipproxy = {
    enable = true;
    inherit package;
    openFirewall = true;
    settings = {
      vip.addresses = [ "192.168.1.100" ];
      network.uplinks = [ "eth1" ];
      keepalived.priority = priority;
      health.type = "tcp";
      backend = map (n: {
        name = "cp${toString (n - 1)}";
        address = "${ip n}:6443";
      }) [ 2 3 4 ];
    };
  };
  # The stand-in apiserver listens on the node's own address (ip index),
  # port 6443, beside vipproxy on VIP:6443: what the module asks of a local
  # kube-apiserver (bindAddress = the node's address, never 0.0.0.0).
}
