# The demo: three stand-in mTLS apiservers behind the real `vipproxy serve`
# on loopback, showing balancing and a failover. No setup, no root.
demo: build
	$(BIN)/vipproxy-demo --bin $(BIN)
