package web

import (
	"context"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/curate/curate/db"
)

// metrics are this server's Prometheus series, on a registry of its own so
// that several servers can run in one test process.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(q *db.Queries) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "curate_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "curate_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
	m.registry.MustRegister(m.requests, m.latency, &jobCollector{q: q},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// middleware records each request under its route pattern (not its path,
// which would make a series per id). An error is answered here, through
// the app's error handler, so that the status counted is the one sent (a
// domain error's 404, not a guess).
func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, c.Request().Method, strconv.Itoa(c.Response().Status)).Inc()
		m.latency.WithLabelValues(route, c.Request().Method).Observe(time.Since(start).Seconds())
		return nil
	}
}

// jobCollector reports River's jobs by kind and state, read at scrape time.
type jobCollector struct{ q *db.Queries }

var jobsDesc = prometheus.NewDesc("curate_jobs", "Background jobs by kind and state.", []string{"kind", "state"}, nil)

func (j *jobCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (j *jobCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := j.q.RiverJobCountByKindState(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(r.Count), r.Kind, r.State)
	}
}
