import Foundation
import Metrics
import Prometheus

/// Bootstraps swift-metrics with a Prometheus registry (called once, from `main`). Histograms get buckets that
/// fit what they measure: a provider answers in milliseconds, a job takes seconds to minutes.
public enum MetricsBootstrap {
    /// Provider round trips: 1 ms … 10 s.
    public static let requestBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        .milliseconds(2500), .seconds(5), .seconds(10),
    ]
    /// Jobs and their queue wait: 10 ms … 30 min.
    public static let jobBuckets: [Duration] = [
        .milliseconds(10), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(120),
        .seconds(300), .seconds(600), .seconds(1800),
    ]

    /// Creates the registry, makes it swift-metrics' backend, and returns it for the `/metrics` endpoint.
    public static func bootstrap(version: String) -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = requestBuckets
        factory.durationHistogramBuckets = [
            "volley_job_duration_seconds": jobBuckets,
            "volley_job_queue_wait_seconds": jobBuckets,
        ]
        MetricsSystem.bootstrap(factory)
        Gauge(label: "volley_build_info", dimensions: [("version", version)]).record(1)
        return registry
    }
}
