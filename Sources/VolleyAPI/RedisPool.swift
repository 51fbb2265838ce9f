import Dispatch
import Foundation
import Logging
import VolleyRedis

/// Blocking Redis clients lent to request handlers, one caller per client at a time.
///
/// `RedisClient` blocks its thread, so calls run on a Dispatch queue, never on Swift's cooperative pool; a handler
/// awaits the result. At most `size` clients exist; callers beyond that wait for one to come back (first come, first
/// served), which bounds the connections the API opens however many requests arrive.
final class RedisPool: @unchecked Sendable {
    private let makeClient: @Sendable (Int) -> RedisClient
    private let size: Int
    private let lock = NSLock()
    private var idle: [RedisClient] = []
    private var created = 0
    private var waiters: [CheckedContinuation<RedisClient, Never>] = []
    private let queue = DispatchQueue(label: "volley.api.redis", attributes: .concurrent)

    init(size: Int, makeClient: @escaping @Sendable (Int) -> RedisClient) {
        self.size = max(1, size)
        self.makeClient = makeClient
    }

    /// Runs `body` with a client on a Dispatch thread.
    func run<T: Sendable>(_ body: @escaping @Sendable (RedisClient) throws -> T) async throws -> T {
        let client = await borrow()
        defer { giveBack(client) }
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do { continuation.resume(returning: try body(client)) } catch { continuation.resume(throwing: error) }
            }
        }
    }

    private func borrow() async -> RedisClient {
        enum Next {
            case ready(RedisClient)
            case make(Int)
            case wait
        }
        let next: Next = lock.withLock {
            if let c = idle.popLast() { return .ready(c) }
            if created < size {
                created += 1
                return .make(created)
            }
            return .wait
        }
        switch next {
        case .ready(let c): return c
        case .make(let n): return makeClient(n)
        case .wait:
            return await withCheckedContinuation { c in
                let handed: RedisClient? = lock.withLock {
                    if let client = idle.popLast() { return client }
                    waiters.append(c)
                    return nil
                }
                if let handed { c.resume(returning: handed) }
            }
        }
    }

    private func giveBack(_ client: RedisClient) {
        let waiter: CheckedContinuation<RedisClient, Never>? = lock.withLock {
            if waiters.isEmpty {
                idle.append(client)
                return nil
            }
            return waiters.removeFirst()
        }
        waiter?.resume(returning: client)
    }
}

/// Runs blocking work (the stores' serialized Redis calls) off the cooperative pool.
func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
    }
}
