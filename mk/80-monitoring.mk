# monitoring/: the Prometheus alert rules are checked and unit-tested with
# promtool (Debian's prometheus package ships it), the absent() alerts for
# series that went missing among them, and the scrape config example is
# checked as a Prometheus config. Every alert's runbook_url names a section
# of docs/runbook.md (TestAlertsHaveARunbook, docs/, in test-go). The Go test
# TestMonitoringUsesExportedMetrics (service/daemon, in test-go) checks that
# every metric the rules and the dashboard use is exported by a running
# daemon, and the dashboard's queries parse.
APT_PACKAGES += prometheus
TEST_TARGETS += test-monitoring

.PHONY: test-monitoring
test-monitoring:
	promtool check rules monitoring/vipproxy-alerts.yml
	cd monitoring && promtool test rules vipproxy-alerts.test.yml
	promtool check config monitoring/prometheus-scrape.yml
	python3 -m json.tool monitoring/vipproxy-dashboard.json >/dev/null
