import Foundation
import Logging

/// What a process's Redis user was refused (`NOPERM`): an ACL that lacks a command or a key pattern is a
/// configuration error, not a passing failure. Every client made with the same `RedisClient.Options` reports here;
/// each refusal (command and key) is logged once, at error level, and the first one is kept for `/readyz`.
///
/// Shared by the process's clients on their own threads: one lock.
public final class RedisPermissionDenials: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: Set<String> = []
    private var firstDenial: String?

    public init() {}

    /// The first refusal, naming the command and key; nil while none happened.
    public var first: String? { lock.withLock { firstDenial } }

    /// Records a refusal; true the first time this one is seen (the caller logs it then).
    func record(_ refusal: String) -> Bool {
        lock.withLock {
            if firstDenial == nil { firstDenial = refusal }
            return seen.insert(refusal).inserted
        }
    }

    /// Whether an error reply is a refusal for lack of permission: `NOPERM`, or (Redis 7.0) the error a script
    /// raises when a command it runs is refused ("ERR The user executing the script can't …").
    public static func isRefusal(_ message: String) -> Bool {
        message.hasPrefix("NOPERM") || message.contains("The user executing the script can't")
    }

    /// Redis's NOPERM text with the command and its first key: `NOPERM …; command XADD on key volley:jobs`.
    static func describe(_ message: String, command: RedisCommand) -> String {
        let name = command.argument(0).map { String(decoding: $0, as: UTF8.self).uppercased() } ?? "?"
        let key = RedisClusterRouter.firstKey(of: command)
        return "\(message); command \(name)" + (key.map { " on key \($0)" } ?? "")
    }

    /// The reply as it is, or, for a NOPERM answer, one that names the command and key; a refusal is recorded in
    /// `denials` and logged the first time (every time without `denials`).
    static func annotate(
        _ reply: RedisReply, command: RedisCommand, denials: RedisPermissionDenials?, logger: Logger
    ) -> RedisReply {
        guard case .error(let e) = reply, isRefusal(e) else { return reply }
        // One word for every refusal, a script's included, so callers tell them by it.
        let described = describe(e.hasPrefix("NOPERM") ? e : "NOPERM \(e)", command: command)
        if denials?.record(described) ?? true {
            logger.error(
                "Redis refused a command: this process's Redis user lacks the permission; fix its ACL",
                metadata: ["refusal": "\(described)", "see": "docs/redis-keys.md, deploy/redis-acl.conf"])
        }
        return .error(described)
    }
}
