import Crypto
import Dispatch
import Foundation
import VolleyRedis

/// Redis calls of concurrent requests sent together: each call joins the queue of one of a few connections, and
/// that connection's thread sends everything queued as one pipeline, then hands each reply back (auto-pipelining).
///
/// Against a pool of blocking clients (one call per round trip and per thread hop), a burst of requests costs one
/// round trip and one wake-up per connection instead of one per call, and Redis reads the calls in one go.
/// Calls on one connection run in the order they were queued; calls on different connections in no set order,
/// which is what a pool gave too.
final class RedisAutoPipeline: @unchecked Sendable {
    private final class Lane: @unchecked Sendable {
        let client: RedisClient
        let queue: DispatchQueue
        var pending: [Call] = []
        var sending = false
        init(client: RedisClient, label: String) {
            self.client = client
            queue = DispatchQueue(label: label)
        }
    }

    private struct Call {
        var command: [String]
        /// The script an EVALSHA runs, to load it when Redis answers NOSCRIPT.
        var script: RedisScript?
        var keys: [String]
        var args: [String]
        var continuation: CheckedContinuation<RedisReply, any Error>
    }

    private let lanes: [Lane]
    private let lock = NSLock()
    private var next = 0
    /// The most calls one pipeline carries; the rest wait for the next one.
    private let maxBatch: Int

    init(connections: Int, maxBatch: Int = 256, makeClient: (Int) -> RedisClient) {
        lanes = (1...max(1, connections)).map { n in
            Lane(client: makeClient(n), label: "volley.api.redis.\(n)")
        }
        self.maxBatch = max(1, maxBatch)
    }

    /// Runs `script` (EVALSHA; loaded on NOSCRIPT) in the next pipeline of one connection.
    func eval(_ script: RedisScript, keys: [String], args: [String]) async throws -> RedisReply {
        let command = ["EVALSHA", shas.sha1(of: script), String(keys.count)] + keys + args
        return try await withCheckedThrowingContinuation { continuation in
            enqueue(Call(command: command, script: script, keys: keys, args: args, continuation: continuation))
        }
    }

    /// Runs one command in the next pipeline of one connection.
    func command(_ command: [String]) async throws -> RedisReply {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(Call(command: command, script: nil, keys: [], args: [], continuation: continuation))
        }
    }

    private let shas = ScriptSHAs()

    private func enqueue(_ call: Call) {
        let (lane, start): (Lane, Bool) = lock.withLock {
            // The lane with the fewest queued calls (round robin among equals), so a burst spreads over the
            // connections and a slow pipeline on one does not hold back calls another could send.
            var best = lanes[next % lanes.count]
            for i in 1..<lanes.count {
                let l = lanes[(next + i) % lanes.count]
                if l.pending.count + (l.sending ? 1 : 0) < best.pending.count + (best.sending ? 1 : 0) { best = l }
            }
            next &+= 1
            best.pending.append(call)
            if best.sending { return (best, false) }
            best.sending = true
            return (best, true)
        }
        if start { lane.queue.async { self.drain(lane) } }
    }

    /// On the lane's thread: sends what is queued, as one pipeline, until nothing is left.
    private func drain(_ lane: Lane) {
        while true {
            let batch: [Call] = lock.withLock {
                if lane.pending.isEmpty {
                    lane.sending = false
                    return []
                }
                let n = min(maxBatch, lane.pending.count)
                let taken = Array(lane.pending.prefix(n))
                lane.pending.removeFirst(n)
                return taken
            }
            if batch.isEmpty { return }
            send(batch, on: lane.client)
        }
    }

    private func send(_ batch: [Call], on client: RedisClient) {
        let replies: [RedisReply]
        do { replies = try client.pipeline(batch.map(\.command)) } catch {
            for call in batch { call.continuation.resume(throwing: error) }
            return
        }
        for (call, reply) in zip(batch, replies) {
            if let script = call.script, let e = reply.errorMessage, e.hasPrefix("NOSCRIPT") {
                // Redis restarted or its scripts were flushed: `eval` loads the script and runs it again.
                do {
                    call.continuation.resume(returning: try client.eval(script, keys: call.keys, args: call.args))
                } catch {
                    call.continuation.resume(throwing: error)
                }
            } else {
                call.continuation.resume(returning: reply)
            }
        }
        if replies.count < batch.count {
            for call in batch[replies.count...] {
                call.continuation.resume(throwing: RedisError(.unexpectedReply, "pipeline answered too few replies"))
            }
        }
    }
}

/// The SHA-1 EVALSHA names a script by, computed once per script.
final class ScriptSHAs: Sendable {
    private let known = NSLockedBox<[String: String]>([:])

    func sha1(of script: RedisScript) -> String {
        known.withLocked { known in
            if let sha = known[script.source] { return sha }
            let sha = Insecure.SHA1.hash(data: Data(script.source.utf8)).lowercaseHex
            known[script.source] = sha
            return sha
        }
    }
}

/// The hot path's script calls (the credential lookup with its rate-limit bucket, the job submission): on the calling
/// event loop's own connection, on auto-pipelined connections with threads of their own (Redis Cluster), or through
/// the pool of blocking clients when `api.redisPipelines` is 0.
struct RedisScripts: Sendable {
    let eventLoops: RedisEventLoopPipeline?
    let pipeline: RedisAutoPipeline?
    let pool: RedisPool

    func eval(_ script: RedisScript, keys: [String], args: [String]) async throws -> RedisReply {
        if let eventLoops { return try await eventLoops.eval(script, keys: keys, args: args) }
        if let pipeline { return try await pipeline.eval(script, keys: keys, args: args) }
        return try await pool.run { client in try client.eval(script, keys: keys, args: args) }
    }
}
