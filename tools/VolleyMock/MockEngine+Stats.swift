import Foundation

// The mock's counters as a snapshot, and what tests read back: accepted pushes, resets.

extension MockEngine {
    /// Stamps the latest accepted send (one clock read and one atomic max per accepted request).
    @inline(__always) func noteAccepted() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        lastAcceptedNanos.max(UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec), ordering: .relaxed)
    }

    public func stats() -> MockStatsSnapshot {
        let (open, closed, opened, maxSeen) = registry.withLock { r in
            (Array(r.open.values), r.closedTotals, r.opened, r.maxStreamsSeen)
        }
        var total = closed
        var perConnection: [UInt64: Int] = [:]
        var maxStreams = maxSeen
        for s in open {
            let c = s.counters.withLock { $0 }
            total.add(c)
            perConnection[s.id] = c.peakConcurrentStreams
            maxStreams = max(maxStreams, c.peakConcurrentStreams)
        }
        var outcomes = total.errors
        if total.apnsAccepted > 0 { outcomes[MockOutcomeKey(.apns, 200, ""), default: 0] += total.apnsAccepted }
        if total.fcmAccepted + total.fcmValidateOnly > 0 {
            outcomes[MockOutcomeKey(.fcm, 200, ""), default: 0] += total.fcmAccepted + total.fcmValidateOnly
        }
        if total.tokenRequests > 0 {
            let failed = total.errors.filter { $0.key.provider == .oauth }.values.reduce(0, +)
            if total.tokenRequests > failed {
                outcomes[MockOutcomeKey(.oauth, 200, ""), default: 0] += total.tokenRequests - failed
            }
        }
        return MockStatsSnapshot(
            totalRequests: total.requests, outcomes: outcomes, acceptedAPNs: total.apnsAccepted,
            acceptedFCM: total.fcmAccepted, fcmValidateOnly: total.fcmValidateOnly, connectionsOpened: opened,
            connectionsOpen: open.count, peakConcurrentStreamsPerConnection: perConnection,
            maxConcurrentStreamsSeen: maxStreams, refusedStreams: total.refusedStreams,
            jwtVerifications: total.jwtVerifications, tokenRequests: total.tokenRequests,
            duplicateDeliveries: total.duplicates,
            lastAcceptedNanos: lastAcceptedNanos.load(ordering: .relaxed),
            apnsProviderTokens: providerTokens.withLock { Set($0.firstSeen.keys) })
    }

    /// The accepted pushes kept by `capturePushes`, oldest first.
    public func capturedPushes() -> [MockCapturedPush] { captured.withLock { $0.pushes } }

    public func resetStats() {
        let open = registry.withLock { r -> [MockConnectionState] in
            r.closedTotals = MockCounters()
            r.opened = r.open.count
            r.maxStreamsSeen = 0
            return Array(r.open.values)
        }
        for s in open { s.counters.withLock { $0 = MockCounters() } }
        duplicates.reset()
        captured.withLock { $0 = MockCaptureLog() }
        lastAcceptedNanos.store(0, ordering: .relaxed)
        providerTokens.withLock { $0 = ProviderTokens() }
    }
}
