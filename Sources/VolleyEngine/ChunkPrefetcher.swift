import Foundation
import VolleyCore

/// Reads a job's next chunks — resolution, registry, outcome ledger — on the lane's second Redis session while the
/// lane sends the current one. Measured on a 100,000-device campaign: the lane spent 1.4 s of 3.4 s in these
/// blocking round trips, with its sends idle; the read-ahead overlaps them.
///
/// One thread per lane, one job at a time (the lane waits for the job's producer to stop before the next job).
final class ChunkPrefetcher: @unchecked Sendable {
    let session: any PipelineSession
    private let cond = NSCondition()
    private var task: (() -> Void)?
    private var stopped = false

    init(session: any PipelineSession, name: String) {
        self.session = session
        let t = Thread { [self] in self.loop() }
        t.name = name
        t.start()
    }

    private func loop() {
        while true {
            cond.lock()
            while task == nil && !stopped { cond.wait() }
            let t = task
            task = nil
            let stop = stopped
            cond.unlock()
            if let t { t() } else if stop { return }
        }
    }

    func submit(_ t: @escaping () -> Void) {
        cond.lock()
        task = t
        cond.signal()
        cond.unlock()
    }

    func stop() {
        cond.lock()
        stopped = true
        cond.signal()
        cond.unlock()
    }

    /// Starts producing `cursor`'s chunks for `job` into a queue of `depth` chunks. With `readLedger` false every
    /// device counts as not yet recorded, without asking Redis.
    func start(
        cursor: any DeviceCursor, job: PushJob, jobID: JobID, chunkSize: Int, readLedger: Bool,
        depth: Int = 2
    ) -> PrefetchedChunks {
        let queue = PrefetchedChunks(capacity: depth)
        let session = self.session
        submit {
            defer { queue.producerFinished() }
            do {
                while let chunk = try cursor.next(max: chunkSize) {
                    var c = chunk
                    c.devices.removeAll { !job.targets($0.platform) }
                    let recorded =
                        c.devices.isEmpty
                        ? []
                        : readLedger
                            ? try session.recordedOutcomes(org: job.org, job: jobID, devices: c.devices)
                            : [RecordedOutcome?](repeating: nil, count: c.devices.count)
                    if !queue.put(.chunk(c, recorded)) { return }
                }
                _ = queue.put(.end)
            } catch {
                _ = queue.put(.failed(error))
            }
        }
        return queue
    }
}

/// The bounded hand-off between a job's producer (the prefetcher thread) and its lane.
final class PrefetchedChunks: @unchecked Sendable {
    enum Item {
        /// Devices of the job's platforms, with the outcome an earlier delivery recorded for each (or nil).
        case chunk(DeviceChunk, [RecordedOutcome?])
        case end
        case failed(any Error)
    }

    private let cond = NSCondition()
    private var items: [Item] = []
    private let capacity: Int
    private var cancelled = false
    private var producerDone = false

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Producer: blocks while full. False when the lane cancelled (stop producing).
    func put(_ item: Item) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        while items.count >= capacity && !cancelled { cond.wait() }
        if cancelled { return false }
        items.append(item)
        cond.broadcast()
        return true
    }

    func producerFinished() {
        cond.lock()
        producerDone = true
        cond.broadcast()
        cond.unlock()
    }

    /// Lane: the next item; blocks while none is ready.
    func take() -> Item {
        cond.lock()
        defer { cond.unlock() }
        while items.isEmpty {
            if producerDone { return .failed(PrefetchEnded()) }
            cond.wait()
        }
        let item = items.removeFirst()
        cond.broadcast()
        return item
    }

    /// Lane: stop the producer and wait until it no longer touches the prefetch session (the next job uses it).
    func cancelAndWait() {
        cond.lock()
        defer { cond.unlock() }
        cancelled = true
        cond.broadcast()
        while !producerDone { cond.wait() }
    }

    struct PrefetchEnded: Error, CustomStringConvertible {
        var description: String { "chunk producer stopped without an end marker" }
    }
}
