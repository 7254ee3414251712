package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vipproxy/vipproxy/service/doctor"
)

// runbookBase is where the alerts' runbook_url points: docs/runbook.md as
// the project's site shows it.
const runbookBase = "https://github.com/vipproxy/vipproxy/blob/main/docs/runbook.md#"

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	Annotations map[string]string `json:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile("../monitoring/vipproxy-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("monitoring/vipproxy-alerts.yml: %v", err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) < 10 {
		t.Fatalf("monitoring/vipproxy-alerts.yml: only %d rules", len(out))
	}
	return out
}

// TestAlertsHaveARunbook: every alert's runbook_url is the runbook's
// section of that alert, and the section exists.
func TestAlertsHaveARunbook(t *testing.T) {
	sections := anchors(headings(t, "runbook.md"))
	for _, r := range alertRules(t) {
		want := runbookBase + anchor(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
		}
		if !sections[anchor(r.Alert)] {
			t.Errorf("alert %s: docs/runbook.md has no section \"### %s\"", r.Alert, r.Alert)
		}
	}
}

// TestRunbookCoversEveryDoctorCheck: each check vipproxy doctor runs has a
// section "### doctor: NAME" in the runbook.
func TestRunbookCoversEveryDoctorCheck(t *testing.T) {
	sections := anchors(headings(t, "runbook.md"))
	for _, name := range doctor.Checks() {
		if !sections[anchor("doctor: "+name)] {
			t.Errorf("docs/runbook.md has no section \"### doctor: %s\"", name)
		}
	}
}

// TestScrapeExampleMatchesTheRules: the job the alert rules select on is
// the job of the scrape config example.
func TestScrapeExampleMatchesTheRules(t *testing.T) {
	b, err := os.ReadFile("../monitoring/prometheus-scrape.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ScrapeConfigs []struct {
			JobName string `json:"job_name"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("monitoring/prometheus-scrape.yml: %v", err)
	}
	jobs := map[string]bool{}
	for _, c := range f.ScrapeConfigs {
		jobs[c.JobName] = true
	}
	jobRE := regexp.MustCompile(`job="([^"]*)"`)
	seen := 0
	for _, r := range alertRules(t) {
		for _, m := range jobRE.FindAllStringSubmatch(r.Expr, -1) {
			seen++
			if !jobs[m[1]] {
				t.Errorf("alert %s selects job=%q, which monitoring/prometheus-scrape.yml does not scrape (jobs: %v)", r.Alert, m[1], jobs)
			}
		}
	}
	if seen == 0 {
		t.Error("no alert selects vipproxy's job: VIPProxyDown and VIPProxyAbsent read up{job=...}")
	}
	for _, name := range []string{"VIPProxyVIPNotHeld", "VIPProxyBGPAnnouncedByNoNode", "VIPProxyAbsent"} {
		found := false
		for _, r := range alertRules(t) {
			if r.Alert == name {
				found = strings.Contains(r.Expr, "absent(")
			}
		}
		if !found {
			t.Errorf("alert %s does not fire on missing series (no absent())", name)
		}
	}
}
