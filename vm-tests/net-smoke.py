# nodes: client cp1
# The harness itself: two VMs boot, get their VLAN 1 addresses and reach
# each other over IPv4 and IPv6 (what every other scenario builds on).
start_all()

with subtest("boot"):
    client.wait_for_unit("multi-user.target")
    cp1.wait_for_unit("multi-user.target")

with subtest("VLAN 1 addressing as in NixOS tests"):
    cp1.wait_until_succeeds("ip -4 addr show dev eth1 | grep -q 192.168.1.2/24", timeout=30)
    cp1.wait_until_succeeds("ip -6 addr show dev eth1 | grep 2001:db8:1::2/64 | grep -vq tentative", timeout=30)
    client.wait_until_succeeds("ip -6 addr show dev eth1 | grep 2001:db8:1::1/64 | grep -vq tentative", timeout=30)
    client.succeed("ping -c1 -W2 192.168.1.2", "ping -c1 -W2 2001:db8:1::2", "ping -c1 -W2 cp1")
    client.fail("ping -c1 -W1 192.168.1.99")
