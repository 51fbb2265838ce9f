internal import COpenSSL
// OpenSSL 3 wrappers: one Swift class per C object, freed in deinit. Nothing here is public except
// `TLSClientCertificateCheck`, which providers call at startup; `TLSContext` and `TLSConnection` are `package` for
// VolleyHTTP2Server's listener and its arrival-time read BIO.
import Foundation

/// Owns an `X509*` (frees it in deinit).
final class X509Certificate {
    let pointer: OpaquePointer
    init(owned pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_free(pointer) }

    var subject: String {
        guard let name = X509_get_subject_name(pointer) else { return "" }
        var buf = [CChar](repeating: 0, count: 512)
        X509_NAME_oneline(name, &buf, Int32(buf.count))
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
    var notBefore: Date? {
        guard let t = X509_get0_notBefore(pointer) else { return nil }
        let s = copenssl_asn1_time_epoch(t)
        return s < 0 ? nil : Date(timeIntervalSince1970: Double(s))
    }
    var notAfter: Date? {
        guard let t = X509_get0_notAfter(pointer) else { return nil }
        let s = copenssl_asn1_time_epoch(t)
        return s < 0 ? nil : Date(timeIntervalSince1970: Double(s))
    }
}

/// Owns an `EVP_PKEY*`.
final class PrivateKey {
    let pointer: OpaquePointer
    init(owned pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// The PEM private key in `file`, decrypted with `passphrase` (empty for an unencrypted key, so that OpenSSL never
    /// asks the terminal for one); nil when the file cannot be opened or read, with OpenSSL's error queue saying why.
    static func readPEM(file: String, passphrase: String) -> PrivateKey? {
        guard let bio = BIO_new_file(file, "r") else { return nil }
        defer { BIO_free(bio) }
        // With a nil callback, OpenSSL uses `u` as the NUL-terminated passphrase (PEM_read_bio_PrivateKey(3)).
        let key: OpaquePointer? = passphrase.withCString {
            PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0))
        }
        return key.map(PrivateKey.init(owned:))
    }
}

/// A client certificate loaded into memory: leaf, key and extra chain certificates.
final class LoadedClientCertificate {
    let leaf: X509Certificate
    let key: PrivateKey
    let chain: [X509Certificate]

    private init(leaf: X509Certificate, key: PrivateKey, chain: [X509Certificate]) {
        self.leaf = leaf
        self.key = key
        self.chain = chain
    }

    static let invalid = HTTP2Error(.configuration, resendIsSafe: false, "Invalid certificate or password")

    /// Loads and checks the validity period. Errors use the three messages operators see:
    /// "Certificate expired", "Certificate not valid yet", "Invalid certificate or password".
    static func load(_ certificate: TLSClientCertificate, now: Date = Date()) throws(HTTP2Error)
        -> LoadedClientCertificate
    {
        let loaded: LoadedClientCertificate
        switch certificate {
        case .pem(let certificateFile, let privateKeyFile, let passphrase):
            loaded = try loadPEM(certificateFile, privateKeyFile, passphrase)
        case .pkcs12(let file, let password):
            loaded = try loadPKCS12(file, password)
        }
        ERR_clear_error()
        if let nb = loaded.leaf.notBefore, nb > now {
            throw HTTP2Error(.configuration, resendIsSafe: false, "Certificate not valid yet")
        }
        if let na = loaded.leaf.notAfter, na < now {
            throw HTTP2Error(.configuration, resendIsSafe: false, "Certificate expired")
        }
        guard X509_check_private_key(loaded.leaf.pointer, loaded.key.pointer) == 1 else {
            ERR_clear_error()
            throw invalid
        }
        return loaded
    }

    private static func loadPEM(_ certFile: String, _ keyFile: String, _ passphrase: String?) throws(HTTP2Error)
        -> LoadedClientCertificate
    {
        guard let certBIO = BIO_new_file(certFile, "r") else {
            ERR_clear_error()
            throw invalid
        }
        defer { BIO_free(certBIO) }
        guard let leafPtr = PEM_read_bio_X509(certBIO, nil, nil, nil) else {
            ERR_clear_error()
            throw invalid
        }
        let leaf = X509Certificate(owned: leafPtr)
        var chain: [X509Certificate] = []
        while let extra = PEM_read_bio_X509(certBIO, nil, nil, nil) { chain.append(X509Certificate(owned: extra)) }
        ERR_clear_error()
        guard let key = PrivateKey.readPEM(file: keyFile, passphrase: passphrase ?? "") else {
            ERR_clear_error()
            throw invalid
        }
        return LoadedClientCertificate(leaf: leaf, key: key, chain: chain)
    }

    private static func loadPKCS12(_ file: String, _ password: String) throws(HTTP2Error) -> LoadedClientCertificate {
        guard let fp = fopen(file, "rb") else { throw invalid }
        defer { fclose(fp) }
        guard let p12 = d2i_PKCS12_fp(fp, nil) else {
            ERR_clear_error()
            throw invalid
        }
        defer { PKCS12_free(p12) }
        var key: OpaquePointer?
        var cert: OpaquePointer?
        var ca: OpaquePointer?
        let ok = PKCS12_parse(p12, password, &key, &cert, &ca)
        guard ok == 1, let key, let cert else {
            if let key { EVP_PKEY_free(key) }
            if let cert { X509_free(cert) }
            if let ca { copenssl_sk_X509_pop_free(ca) }
            ERR_clear_error()
            throw invalid
        }
        var chain: [X509Certificate] = []
        if let ca {
            for i in 0..<copenssl_sk_X509_num(ca) {
                if let c = copenssl_sk_X509_value(ca, i) { chain.append(X509Certificate(owned: c)) }
            }
            copenssl_sk_X509_free(ca) // the certificates now belong to `chain`
        }
        return LoadedClientCertificate(leaf: X509Certificate(owned: cert), key: PrivateKey(owned: key), chain: chain)
    }
}

/// Checks a client certificate before anything connects, so an application can refuse to start with an
/// expired or unreadable certificate instead of failing every send.
public enum TLSClientCertificateCheck {
    /// Returns the certificate's subject and expiry, or throws `HTTP2Error` (kind `.configuration`) with
    /// "Certificate expired", "Certificate not valid yet" or "Invalid certificate or password".
    public static func validate(_ certificate: TLSClientCertificate, now: Date = Date()) throws(HTTP2Error) -> (
        subject: String, notAfter: Date
    ) {
        let loaded = try LoadedClientCertificate.load(certificate, now: now)
        return (loaded.leaf.subject, loaded.leaf.notAfter ?? .distantFuture)
    }
}

/// Owns an `SSL_CTX*`. Immutable after init, so it may be shared by many connections (OpenSSL
/// documents SSL_CTX as safe for concurrent SSL_new once configured).
package final class TLSContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Length-prefixed ALPN list passed to the server's select callback; freed in deinit.
    private var alpnSelectList: UnsafeMutablePointer<UInt8>?

    private init(owned pointer: OpaquePointer) { self.pointer = pointer }
    deinit {
        SSL_CTX_free(pointer)
        alpnSelectList?.deallocate()
    }

    /// OpenSSL's socket BIO writes with write(2), which raises SIGPIPE on a reset connection; there is no
    /// per-socket opt-out on Linux, so the process ignores SIGPIPE once (EPIPE is handled as an error).
    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    private static func base(server: Bool) throws(HTTP2Error) -> TLSContext {
        _ = ignoreSIGPIPE
        guard let method = server ? TLS_server_method() : TLS_client_method(), let ctx = SSL_CTX_new(method) else {
            throw HTTP2Error.openSSL("SSL_CTX_new failed", in: .setup)
        }
        let c = TLSContext(owned: ctx)
        _ = copenssl_ctx_set_min_proto_version(ctx, TLS1_2_VERSION)
        SSL_CTX_set_options(ctx, copenssl_default_options())
        _ = copenssl_ctx_set_mode(
            ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS))
        return c
    }

    /// Client context: TLS 1.2+, peer verification always on, ALPN `alpn` (the providers' "h2"; none for Redis).
    static func client(caFile: String?, clientCertificate: TLSClientCertificate?, alpn protocols: [String] = ["h2"])
        throws(HTTP2Error) -> TLSContext
    {
        let c = try base(server: false)
        let ctx = c.pointer
        if let caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else {
                throw HTTP2Error.openSSL("Cannot load CA file \(caFile)", in: .setup)
            }
        } else {
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                throw HTTP2Error.openSSL("Cannot load the system trust store", in: .setup)
            }
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        var alpn: [UInt8] = []
        for p in protocols where !p.isEmpty && p.utf8.count < 256 {
            alpn.append(UInt8(p.utf8.count))
            alpn.append(contentsOf: p.utf8)
        }
        // Returns 0 on success, unlike most OpenSSL calls.
        guard alpn.isEmpty || SSL_CTX_set_alpn_protos(ctx, alpn, UInt32(alpn.count)) == 0 else {
            throw HTTP2Error.openSSL("Cannot set ALPN", in: .setup)
        }
        if let clientCertificate {
            let loaded = try LoadedClientCertificate.load(clientCertificate)
            guard SSL_CTX_use_certificate(ctx, loaded.leaf.pointer) == 1,
                SSL_CTX_use_PrivateKey(ctx, loaded.key.pointer) == 1
            else {
                ERR_clear_error()
                throw LoadedClientCertificate.invalid
            }
            for extra in loaded.chain {
                // add0 takes ownership: hand it its own reference.
                X509_up_ref(extra.pointer)
                if copenssl_ctx_add0_chain_cert(ctx, extra.pointer) != 1 { X509_free(extra.pointer) }
            }
        }
        return c
    }

    /// Server context: certificate chain + key, ALPN choice from `alpnProtocols`, optional required client certs.
    package static func server(
        certificateChainFile: String, privateKeyFile: String, clientCAFile: String?,
        alpnProtocols: [String]
    ) throws(HTTP2Error) -> TLSContext {
        let c = try base(server: true)
        let ctx = c.pointer
        if let problem = c.useIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile) {
            throw HTTP2Error(.configuration, resendIsSafe: false, problem.message)
        }
        if let clientCAFile {
            guard SSL_CTX_load_verify_locations(ctx, clientCAFile, nil) == 1 else {
                throw HTTP2Error.openSSL("Cannot load client CA file \(clientCAFile)", in: .setup)
            }
            if let names = SSL_load_client_CA_file(clientCAFile) { SSL_CTX_set_client_CA_list(ctx, names) }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
        c.setALPN(alpnProtocols)
        return c
    }

    /// The server's ALPN choice: the first of `protocols` that the client also offers.
    fileprivate func setALPN(_ protocols: [String]) {
        var wire: [UInt8] = []
        for p in protocols where !p.isEmpty && p.utf8.count < 256 {
            wire.append(UInt8(p.utf8.count))
            wire.append(contentsOf: p.utf8)
        }
        // Layout expected by copenssl_alpn_select: 2-byte little-endian length, then the wire list.
        let list = UnsafeMutablePointer<UInt8>.allocate(capacity: wire.count + 2)
        list[0] = UInt8(wire.count & 0xff)
        list[1] = UInt8(wire.count >> 8)
        for (i, b) in wire.enumerated() { list[i + 2] = b }
        alpnSelectList = list
        copenssl_ctx_set_alpn_select(pointer, list)
    }
}

extension TLSContext {
    /// Why a certificate chain and key cannot serve, with the file to fix.
    package enum IdentityProblem: Error, Sendable {
        case certificate(String)
        case key(String)
        case mismatch(String)

        package var message: String {
            switch self {
            case .certificate(let m), .key(let m), .mismatch(let m): m
            }
        }
    }

    /// Loads the PEM chain (leaf first) and the PEM key into this context and checks that the key is the leaf's,
    /// naming which of the two files is at fault.
    func useIdentity(certificateChainFile: String, privateKeyFile: String) -> IdentityProblem? {
        ERR_clear_error()
        guard SSL_CTX_use_certificate_chain_file(pointer, certificateChainFile) == 1 else {
            return .certificate(openSSLErrorString("cannot read a PEM certificate chain from \(certificateChainFile)"))
        }
        // A server key is unencrypted: the empty passphrase keeps OpenSSL from asking the terminal for one.
        guard let owned = PrivateKey.readPEM(file: privateKeyFile, passphrase: "") else {
            return .key(openSSLErrorString("cannot read an unencrypted PEM private key from \(privateKeyFile)"))
        }
        guard SSL_CTX_use_PrivateKey(pointer, owned.pointer) == 1, SSL_CTX_check_private_key(pointer) == 1 else {
            return .mismatch(
                openSSLErrorString(
                    "the private key in \(privateKeyFile) does not match the certificate in \(certificateChainFile)"))
        }
        return nil
    }

    /// A server context for a NIO channel (`TLSChannelHandler`): the chain and key, ALPN `alpnProtocols`.
    package static func nioServer(certificateChainFile: String, privateKeyFile: String, alpnProtocols: [String])
        throws(IdentityProblem) -> TLSContext
    {
        let c: TLSContext
        do { c = try base(server: true) } catch { throw .certificate(error.description) }
        if let problem = c.useIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile) {
            throw problem
        }
        c.setALPN(alpnProtocols)
        return c
    }
}

/// Owns an `SSL*` bound to a socket fd (SSL_set_fd does not take ownership of the fd).
/// Used only on its connection's queue.
package final class TLSConnection {
    package let pointer: OpaquePointer
    package init(context: TLSContext, fd: Int32, serverSide: Bool) throws(HTTP2Error) {
        guard let ssl = SSL_new(context.pointer) else {
            throw HTTP2Error.openSSL("SSL_new failed", in: .connecting)
        }
        pointer = ssl
        SSL_set_fd(ssl, fd)
        // Read ahead: one read(2) takes whatever has arrived (up to OpenSSL's buffer) instead of two per record
        // (its 5-byte header, then its body). The read loop calls SSL_read until WANT_READ, so nothing stays buffered.
        SSL_set_read_ahead(ssl, 1)
        if serverSide { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
    }
    deinit { SSL_free(pointer) }

    /// SNI for DNS names only (RFC 6066 §3: no IP literals) and the name/IP checked in the certificate.
    func setPeerName(_ host: String) throws(HTTP2Error) { try Self.setPeerName(host, on: pointer) }

    /// As `setPeerName(_:)` for any client `SSL*` (the NIO channel handler's too).
    static func setPeerName(_ host: String, on ssl: OpaquePointer) throws(HTTP2Error) {
        if isIPLiteral(host) {
            guard let param = SSL_get0_param(ssl), X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1 else {
                throw HTTP2Error.openSSL("Cannot verify IP \(host)", in: .setup)
            }
        } else {
            _ = copenssl_set_tlsext_host_name(ssl, host)
            guard SSL_set1_host(ssl, host) == 1 else {
                throw HTTP2Error.openSSL("Cannot verify host \(host)", in: .setup)
            }
        }
    }

    enum Step {
        case done, wantRead, wantWrite
        case failed(HTTP2Error)
    }

    func handshake() -> Step {
        ERR_clear_error()
        let rv = SSL_do_handshake(pointer)
        if rv == 1 { return .done }
        let err = SSL_get_error(pointer, rv)
        switch err {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default:
            let verify = SSL_get_verify_result(pointer)
            if verify != X509_V_OK {
                ERR_clear_error()
                return .failed(HTTP2Error.certificateVerification(verify))
            }
            return .failed(HTTP2Error.openSSL("TLS handshake failed", sslError: err, in: .handshake))
        }
    }

    /// The ALPN protocol the peer selected, if any.
    package var selectedALPN: String? {
        var data: UnsafePointer<UInt8>?
        var len: UInt32 = 0
        SSL_get0_alpn_selected(pointer, &data, &len)
        guard let data, len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(len)), as: UTF8.self)
    }

    package var peerCertificateSubject: String? {
        guard let cert = SSL_get1_peer_certificate(pointer) else { return nil }
        return X509Certificate(owned: cert).subject
    }

    enum IOResult {
        case bytes(Int)
        case wantRead, wantWrite, closed
        case failed(HTTP2Error)
    }

    @inline(__always)
    func read(_ buffer: UnsafeMutableRawPointer, _ count: Int) -> IOResult {
        let n = SSL_read(pointer, buffer, Int32(count))
        if n > 0 { return .bytes(Int(n)) }
        return classify(n)
    }

    @inline(__always)
    func write(_ buffer: UnsafeRawPointer, _ count: Int) -> IOResult {
        let n = SSL_write(pointer, buffer, Int32(min(count, Int(Int32.max))))
        if n > 0 { return .bytes(Int(n)) }
        return classify(n)
    }

    private func classify(_ n: Int32) -> IOResult {
        let err = SSL_get_error(pointer, n)
        switch err {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            let e = errno
            ERR_clear_error()
            if e == 0 { return .closed }
            return .failed(HTTP2Error.posix(e, "connection failed", in: .established))
        default:
            return .failed(HTTP2Error.openSSL("TLS error", sslError: err, in: .established))
        }
    }

    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(pointer)
        ERR_clear_error()
    }
}

func isIPLiteral(_ host: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
}
