/// One Redis reply, copied out of hiredis's reply tree (hiredis 0.14 speaks RESP2 only).
public enum RedisReply: Sendable, Hashable, CustomStringConvertible {
    case status(String)
    case error(String)
    case integer(Int64)
    case string(String)
    case null
    case array([RedisReply])

    public var string: String? {
        switch self {
        case .string(let s), .status(let s): return s
        case .integer(let i): return String(i)
        default: return nil
        }
    }
    public var integer: Int64? {
        switch self {
        case .integer(let i): return i
        case .string(let s): return Int64(s)
        default: return nil
        }
    }
    public var array: [RedisReply]? {
        if case .array(let a) = self { return a }
        return nil
    }
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
    public var errorMessage: String? {
        if case .error(let e) = self { return e }
        return nil
    }

    /// Throws `RedisError(.server)` when this is an error reply; returns self otherwise.
    @discardableResult
    public func throwIfError(_ context: @autoclosure () -> String = "") throws -> RedisReply {
        if case .error(let e) = self {
            let ctx = context()
            throw RedisError(.server, ctx.isEmpty ? e : "\(ctx): \(e)")
        }
        return self
    }

    /// A flat array of [field, value, field, value] as a dictionary (HGETALL, stream entry fields).
    public var fieldPairs: [(String, String)] {
        guard let a = array else { return [] }
        var out: [(String, String)] = []
        out.reserveCapacity(a.count / 2)
        var i = 0
        while i + 1 < a.count {
            if let k = a[i].string, let v = a[i + 1].string { out.append((k, v)) }
            i += 2
        }
        return out
    }

    public var description: String {
        switch self {
        case .status(let s): return "+\(s)"
        case .error(let e): return "-\(e)"
        case .integer(let i): return ":\(i)"
        case .string(let s): return "\"\(s.count > 64 ? String(s.prefix(64)) + "…" : s)\""
        case .null: return "(nil)"
        case .array(let a): return "[" + a.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// An error from the Redis layer. A struct so kinds can grow.
public struct RedisError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        /// Could not connect, or the connection broke (I/O error, EOF, timeout). Reconnecting may help.
        public static let connection = Kind(rawValue: "connection")
        /// The server answered with an error reply.
        public static let server = Kind(rawValue: "server")
        /// AUTH or SELECT failed: configuration must be fixed.
        public static let authentication = Kind(rawValue: "authentication")
        /// TLS: the server's certificate did not verify, or the trust's files cannot be read: configuration must
        /// be fixed (`redis.tls`), so it is not retried.
        public static let certificate = Kind(rawValue: "tls-certificate")
        /// The endpoint URL is malformed.
        public static let invalidEndpoint = Kind(rawValue: "invalid-endpoint")
        /// The reply did not have the expected shape.
        public static let unexpectedReply = Kind(rawValue: "unexpected-reply")
        /// The operation was given up because the caller is shutting down.
        public static let cancelled = Kind(rawValue: "cancelled")
        public var description: String { rawValue }
    }
    public let kind: Kind
    public let message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { "redis \(kind): \(message)" }
    public var isConnectionError: Bool { kind == .connection }
}
