import VolleyCore

/// Public value types of the transport. Classes that own sockets live beside this file;
/// nothing here touches C.

/// One header field. `sensitive` headers are never indexed by HPACK (RFC 7541 §7.1.3):
/// use it for `authorization` and for values that change per request (`:path` with a device token).
public struct HTTP2Header: Sendable, Hashable {
    public var name: String
    public var value: String
    public var sensitive: Bool
    public init(_ name: String, _ value: String, sensitive: Bool = false) {
        self.name = name
        self.value = value
        self.sensitive = sensitive
    }
}

/// A request to submit on a client connection. Scheme is always https.
///
/// Fields travel pre-encoded (`HTTP2HeaderBlock`): `sharedFields` holds what many requests have in common
/// (encoded once, its storage shared rather than copied), `fields` what is this request's own. Pseudo-header
/// fields (`:method`, `:authority`, `:path`) may sit in either block; the transport sends them first
/// (RFC 9113 §8.3) and adds `:scheme: https` itself. `:path` and `authorization` must be marked sensitive
/// (never HPACK-indexed); the `init(method:authority:path:headers:body:)` form does that for `:path`.
public struct HTTP2Request: Sendable {
    public var sharedFields: HTTP2HeaderBlock
    public var fields: HTTP2HeaderBlock
    public var body: [UInt8]
    /// On a 2xx answer, deliver the status alone: the client keeps no response field and no body. For callers
    /// that act on a success's status only (the providers' fan-out sends); any other status arrives whole.
    public var statusOnlyOnSuccess = false

    public init(
        method: String = "POST", authority: String, path: String, headers: [HTTP2Header] = [], body: [UInt8] = []
    ) {
        var bytes = 7 + method.utf8.count + 10 + authority.utf8.count + 5 + path.utf8.count
        for h in headers { bytes += h.name.utf8.count + h.value.utf8.count }
        var f = HTTP2HeaderBlock(reservingBytes: bytes, fields: 3 + headers.count)
        f.append(":method", method)
        f.append(":authority", authority)
        // `:path` is never indexed: for APNs it carries a different device token on every request, and indexing
        // it would only churn the peer's small HPACK table (Apple: do not index `:path` or `authorization`).
        f.append(":path", path, sensitive: true)
        for h in headers { f.append(name: h.name, value: h.value, sensitive: h.sensitive) }
        self.sharedFields = HTTP2HeaderBlock()
        self.fields = f
        self.body = body
    }

    /// A request from pre-encoded fields (see the type's documentation for what they must contain).
    public init(sharedFields: HTTP2HeaderBlock = HTTP2HeaderBlock(), fields: HTTP2HeaderBlock, body: [UInt8] = []) {
        self.sharedFields = sharedFields
        self.fields = fields
        self.body = body
    }

    private func pseudo(_ name: String) -> String? { fields.value(for: name) ?? sharedFields.value(for: name) }
    /// Re-encodes the request with one part replaced (the setters below: rare paths, kept for source compatibility).
    private mutating func reencode(
        method: String? = nil, authority: String? = nil, path: String? = nil,
        headers: [HTTP2Header]? = nil
    ) {
        let statusOnly = statusOnlyOnSuccess
        self = HTTP2Request(
            method: method ?? self.method, authority: authority ?? self.authority, path: path ?? self.path,
            headers: headers ?? self.headers, body: body)
        statusOnlyOnSuccess = statusOnly
    }
    public var method: String {
        get { pseudo(":method") ?? "" }
        set { reencode(method: newValue) }
    }
    public var authority: String {
        get { pseudo(":authority") ?? "" }
        set { reencode(authority: newValue) }
    }
    public var path: String {
        get { pseudo(":path") ?? "" }
        set { reencode(path: newValue) }
    }
    /// The regular (non-pseudo) fields, shared ones first (allocates Strings: tests and rare paths).
    public var headers: [HTTP2Header] {
        get { (sharedFields.headers + fields.headers).filter { !$0.name.hasPrefix(":") } }
        set { reencode(headers: newValue) }
    }
}

/// A complete response. The client keeps received fields encoded (`fields`) and makes Strings only for the
/// fields someone asks for; `headers` lists both kinds.
public struct HTTP2Response: Sendable {
    public var status: Int
    public var body: [UInt8]
    /// The pool connection that received the response (nil when it was not received by a pool), for
    /// `HTTP2RequestSubmitter.retireConnection(_:)`.
    public var connection: HTTP2PoolConnectionID?
    /// Fields given as values (the server side builds responses this way).
    private var listed: [HTTP2Header]
    /// Fields as received by the client, still encoded.
    public var fields: HTTP2HeaderBlock
    public init(status: Int, headers: [HTTP2Header] = [], body: [UInt8] = []) {
        self.status = status
        self.listed = headers
        self.body = body
        self.fields = HTTP2HeaderBlock()
    }
    public init(status: Int, fields: HTTP2HeaderBlock, body: [UInt8] = []) {
        self.status = status
        self.listed = []
        self.body = body
        self.fields = fields
    }
    public var headers: [HTTP2Header] {
        get { fields.isEmpty ? listed : listed + fields.headers }
        set {
            listed = newValue
            fields = HTTP2HeaderBlock()
        }
    }
    /// First value of a header (names compared lower-case).
    public func header(_ name: String) -> String? {
        if !listed.isEmpty {
            let n = name.lowercased()
            if let v = listed.first(where: { $0.name == n })?.value { return v }
        }
        return fields.value(for: name)
    }
}

/// Why a request got no response. `resendIsSafe` is true only when the request provably never reached
/// the server's application: refused stream (RFC 9113 §8.7), stream id above GOAWAY's last-stream-id,
/// or never written to the socket.
public struct HTTP2Error: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        public static let refusedStream = Kind("refused-stream")
        public static let goAway = Kind("goaway")
        public static let connectionReset = Kind("connection-reset")
        public static let connectFailed = Kind("connect-failed")
        public static let tlsHandshake = Kind("tls-handshake")
        public static let certificateVerification = Kind("certificate-verification")
        public static let alpnNotH2 = Kind("alpn-not-h2")
        public static let streamReset = Kind("stream-reset")
        public static let timeout = Kind("timeout")
        public static let protocolError = Kind("protocol-error")
        public static let shutdown = Kind("shutdown")
        public static let configuration = Kind("configuration")
        /// The pool's bounded queue of requests waiting for a stream is full.
        public static let queueFull = Kind("queue-full")
        /// No connection to the endpoint could be made within the pool's outage budget
        /// (`HTTP2ClientConfiguration.providerOutageSeconds`): the request was never sent.
        public static let providerUnreachable = Kind("provider-unreachable")
        /// The request was written and its connection died before the answer came: it may have reached the
        /// server, so it is not resent (at most once).
        public static let writtenUnanswered = Kind("written-unanswered")
        /// The request's owner asked, as its connection was about to write it, to hold it
        /// (`HTTP2PendingRequest.holdsBeforeWriting`: the provider paused its target): never written, not resent by
        /// the pool; the owner sends it again when the pause ends.
        public static let held = Kind("held")
    }
    public var kind: Kind
    public var resendIsSafe: Bool
    public var message: String
    public init(_ kind: Kind, resendIsSafe: Bool, _ message: String) {
        self.kind = kind
        self.resendIsSafe = resendIsSafe
        self.message = message
    }
    public var description: String { "\(kind): \(message)\(resendIsSafe ? " (safe to resend)" : "")" }
}

/// A client certificate for TLS client auth (APNs certificate auth).
public enum TLSClientCertificate: Sendable, Hashable {
    /// PEM certificate (chain) file + PEM private key file.
    case pem(certificateFile: String, privateKeyFile: String, passphrase: String?)
    /// PKCS#12 bundle with its password.
    case pkcs12(file: String, password: String)
}

/// How a client pool reaches one endpoint.
public struct HTTP2ClientConfiguration: Sendable, Hashable {
    /// Host name or IP literal to connect to; also SNI and the name verified in the certificate.
    public var host: String
    public var port: Int
    /// Extra trusted CA file (PEM). When nil, the system trust store is used. Verification is always on.
    public var caFile: String?
    public var clientCertificate: TLSClientCertificate?
    /// Connections kept to this endpoint (opened lazily).
    public var connections: Int
    /// Our own cap on streams per connection, below the peer's SETTINGS_MAX_CONCURRENT_STREAMS.
    public var maxConcurrentStreamsCap: Int
    public var connectTimeoutSeconds: Double
    /// Time from submit to response before the request fails with `.timeout` (not safe to resend once written).
    public var requestTimeoutSeconds: Double
    /// Send a PING after this long without reading anything; 0 disables.
    public var idlePingSeconds: Double
    /// A PING not answered within this closes the connection.
    public var pingTimeoutSeconds: Double
    /// How many times the pool resends a request that failed "safe to resend" before giving it back.
    public var maxResends: Int
    /// Reconnect backoff: base and cap, exponential with jitter.
    public var reconnectBaseSeconds: Double
    public var reconnectMaxSeconds: Double
    /// The wait before a connect after failed ones: `reconnectBaseSeconds` doubling up to `reconnectMaxSeconds`,
    /// between half and all of it at random, so that many pools that lost the same endpoint do not reconnect in step.
    var reconnectBackoff: ExponentialBackoff {
        ExponentialBackoff(base: reconnectBaseSeconds, max: reconnectMaxSeconds, jitter: 0.5)
    }
    /// A connection retired on request (`retireConnection(_:)`) is replaced after a back-off drawn uniformly from
    /// these bounds.
    public var retireBackoffMinSeconds: Double = 1
    public var retireBackoffMaxSeconds: Double = 5
    /// Requests that may wait for a free stream; beyond this `submit` fails at once with `.queueFull`.
    public var maxQueuedRequests: Int
    /// How long a request that was never written may wait for a connection, counted from its submit: while no
    /// connection to the endpoint is ready (connects failing, the endpoint restarting, a load balancer failing
    /// over) it stays queued, connects are retried with the back-off above, and it is resent after a refused
    /// stream or a GOAWAY past `maxResends`. Past it the request fails with `.providerUnreachable`.
    public var providerOutageSeconds: Double = 120
    /// A request written and unanswered when its connection dies (`.writtenUnanswered`) is resent on another
    /// connection while its outage budget lasts, as one never written is. Only for requests whose second arrival
    /// does no harm: pushes carrying a collapse identity (`worker.unansweredSends: resend`). Off: such a request
    /// fails (at most once).
    public var resendUnanswered = false

    public init(
        host: String, port: Int = 443, caFile: String? = nil, clientCertificate: TLSClientCertificate? = nil,
        connections: Int = 1, maxConcurrentStreamsCap: Int = 1000, connectTimeoutSeconds: Double = 10,
        requestTimeoutSeconds: Double = 30, idlePingSeconds: Double = 60, pingTimeoutSeconds: Double = 10,
        maxResends: Int = 3, reconnectBaseSeconds: Double = 0.1, reconnectMaxSeconds: Double = 30,
        maxQueuedRequests: Int = 100_000
    ) {
        self.host = host
        self.port = port
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.connections = connections
        self.maxConcurrentStreamsCap = maxConcurrentStreamsCap
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.requestTimeoutSeconds = requestTimeoutSeconds
        self.idlePingSeconds = idlePingSeconds
        self.pingTimeoutSeconds = pingTimeoutSeconds
        self.maxResends = maxResends
        self.reconnectBaseSeconds = reconnectBaseSeconds
        self.reconnectMaxSeconds = reconnectMaxSeconds
        self.maxQueuedRequests = maxQueuedRequests
    }
}
