// Pins the Prometheus Operator, whose ServiceMonitor CRD the e2e test of the Helm chart installs to check the
// chart's ServiceMonitor against the real schema. No package of it is built: the module is only downloaded for
// example/prometheus-operator-crd/, so `go mod tidy` would drop the require below; do not tidy this module.
module github.com/k8sm/k8sm/tests/go/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
