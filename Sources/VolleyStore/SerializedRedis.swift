import Foundation
import VolleyRedis

/// One `RedisClient` shared by a store's callers, one call at a time (the client is not thread-safe and blocks).
/// For parallelism, give each thread its own store; this lock only makes sharing safe.
final class SerializedRedis: @unchecked Sendable {
    let client: RedisClient
    private let lock = NSLock()
    init(_ client: RedisClient) { self.client = client }
    func with<T>(_ body: (RedisClient) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(client)
    }
}

extension RedisReply {
    /// Integer reply or a typed error naming `what`.
    func int(_ what: String) throws -> Int {
        try throwIfError(what)
        guard let i = integer else { throw RedisError(.unexpectedReply, "\(what): expected an integer, got \(self)") }
        return Int(i)
    }
}
