import Crypto
import CryptoExtras
import Foundation
import SwiftASN1
import X509

/// Everything the mock needs to be a believable APNs + FCM endpoint, kept in one state directory so that a second
/// run (and every client configured from `endpoints.json`) sees the same CA, keys and ids.
///
/// Files in the state directory (all PEM unless noted):
/// - `ca.pem` / `ca.key`: test CA that signs the server certificate (clients trust `ca.pem`).
/// - `server.pem` / `server.key`: server certificate, SAN IP:127.0.0.1 + DNS:localhost, EC P-256.
/// - `client-ca.pem` / `client-ca.key`: CA for APNs certificate-auth clients.
/// - `client.pem` / `client.key` / `client.p12` (PKCS#12, password in `credentials.json`).
/// - `AuthKey_<KEYID>.p8`: APNs signing key (EC P-256, PKCS#8).
/// - `fcm-key.pem`: RSA-2048 PKCS#8 key of the FCM service account.
/// - `service-account.json`: FCM service account (rewritten on every start: `token_uri` carries the port).
/// - `credentials.json`: key id, team id, topic, project id, p12 password (what makes a reuse possible).
/// - `endpoints.json`: written by the server once it listens.
public struct MockCredentials: Sendable {
    public let stateDirectory: String
    public let caFile: String
    public let caKeyFile: String
    public let serverCertificateFile: String
    public let serverKeyFile: String
    public let clientCAFile: String
    public let clientCertificateFile: String
    public let clientKeyFile: String
    /// nil when the `openssl` CLI was not available to build it.
    public let clientP12File: String?
    public let clientP12Password: String
    public let apnsKeyFile: String
    public let apnsKeyID: String
    public let apnsTeamID: String
    public let apnsTopic: String
    public let fcmKeyFile: String
    public let fcmProjectID: String
    public let fcmClientEmail: String
    public let fcmPrivateKeyID: String
    public var serviceAccountFile: String { stateDirectory + "/service-account.json" }
    public var endpointsFile: String { stateDirectory + "/endpoints.json" }

    /// The APNs verification key (public half of the p8).
    public let apnsPublicKey: P256.Signing.PublicKey
    /// The FCM service account's public key (verifies the RS256 assertion at `/token`).
    public let fcmPublicKey: _RSA.Signing.PublicKey

    struct Stored: Codable {
        var apnsKeyID: String
        var apnsTeamID: String
        var apnsTopic: String
        var fcmProjectID: String
        var fcmClientEmail: String
        var fcmPrivateKeyID: String
        var clientP12Password: String
    }

    /// Creates the state directory's contents, or reuses them when `credentials.json` and every key/cert file exist.
    public static func loadOrCreate(stateDirectory rawDirectory: String) throws -> MockCredentials {
        let fm = FileManager.default
        let dir = URL(fileURLWithPath: rawDirectory).standardizedFileURL.path
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let credentialsFile = dir + "/credentials.json"
        if let data = fm.contents(atPath: credentialsFile),
            let stored = try? JSONDecoder().decode(Stored.self, from: data),
            let existing = try? load(directory: dir, stored: stored)
        {
            return existing
        }
        return try create(directory: dir)
    }

    private static func paths(_ dir: String, keyID: String) -> [String: String] {
        [
            "ca": dir + "/ca.pem", "caKey": dir + "/ca.key",
            "server": dir + "/server.pem", "serverKey": dir + "/server.key",
            "clientCA": dir + "/client-ca.pem", "clientCAKey": dir + "/client-ca.key",
            "client": dir + "/client.pem", "clientKey": dir + "/client.key", "p12": dir + "/client.p12",
            "apns": dir + "/AuthKey_\(keyID).p8", "fcm": dir + "/fcm-key.pem",
        ]
    }

    private static func load(directory dir: String, stored: Stored) throws -> MockCredentials {
        let p = paths(dir, keyID: stored.apnsKeyID)
        let fm = FileManager.default
        for key in ["ca", "caKey", "server", "serverKey", "clientCA", "client", "clientKey", "apns", "fcm"] {
            guard let path = p[key], fm.fileExists(atPath: path) else { throw MockSetupError("missing \(key)") }
        }
        let apnsPEM = try String(contentsOfFile: p["apns"]!, encoding: .utf8)
        let fcmPEM = try String(contentsOfFile: p["fcm"]!, encoding: .utf8)
        let apnsKey = try P256.Signing.PrivateKey(pemRepresentation: apnsPEM)
        let fcmKey = try _RSA.Signing.PrivateKey(pemRepresentation: fcmPEM)
        let p12 = fm.fileExists(atPath: p["p12"]!) ? p["p12"]! : nil
        return MockCredentials(
            stateDirectory: dir, caFile: p["ca"]!, caKeyFile: p["caKey"]!, serverCertificateFile: p["server"]!,
            serverKeyFile: p["serverKey"]!, clientCAFile: p["clientCA"]!, clientCertificateFile: p["client"]!,
            clientKeyFile: p["clientKey"]!, clientP12File: p12, clientP12Password: stored.clientP12Password,
            apnsKeyFile: p["apns"]!, apnsKeyID: stored.apnsKeyID, apnsTeamID: stored.apnsTeamID,
            apnsTopic: stored.apnsTopic, fcmKeyFile: p["fcm"]!, fcmProjectID: stored.fcmProjectID,
            fcmClientEmail: stored.fcmClientEmail, fcmPrivateKeyID: stored.fcmPrivateKeyID,
            apnsPublicKey: apnsKey.publicKey, fcmPublicKey: fcmKey.publicKey)
    }

    private static func randomID(_ count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var rng = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
    }

    private static func hex(_ count: Int) -> String {
        var rng = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef")
        return String((0..<count).map { _ in digits[Int(rng.next() & 15)] })
    }

    private static func write(_ text: String, to path: String, mode: Int = 0o644) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    private static func create(directory dir: String) throws -> MockCredentials {
        let stored = Stored(
            apnsKeyID: randomID(10), apnsTeamID: randomID(10), apnsTopic: "com.example.volley",
            fcmProjectID: "volley-mock-project",
            fcmClientEmail: "volley-mock@volley-mock-project.iam.gserviceaccount.com",
            fcmPrivateKeyID: hex(40), clientP12Password: "volley-" + hex(12))
        let p = paths(dir, keyID: stored.apnsKeyID)
        let now = Date()
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(5 * 365 * 86400)

        // Server CA + server certificate.
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            CommonName("Volley Mock CA")
            OrganizationName("Volley")
        }
        let caCert = try makeCA(name: caName, key: caKey, notBefore: notBefore, notAfter: notAfter)
        let serverKey = P256.Signing.PrivateKey()
        let serverCert = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: notBefore, notValidAfter: notAfter, issuer: caName,
            subject: try DistinguishedName { CommonName("localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([
                    .dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                ])
            },
            issuerPrivateKey: .init(caKey))

        // Client CA + client certificate (APNs certificate auth).
        let clientCAKey = P256.Signing.PrivateKey()
        let clientCAName = try DistinguishedName {
            CommonName("Volley Mock Client CA")
            OrganizationName("Volley")
        }
        let clientCACert = try makeCA(name: clientCAName, key: clientCAKey, notBefore: notBefore, notAfter: notAfter)
        let clientKey = P256.Signing.PrivateKey()
        let clientCert = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(clientKey.publicKey),
            notValidBefore: notBefore, notValidAfter: notAfter, issuer: clientCAName,
            subject: try DistinguishedName {
                CommonName("Apple Push Services: \(stored.apnsTopic)")
                OrganizationalUnitName(stored.apnsTeamID)
            },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
            },
            issuerPrivateKey: .init(clientCAKey))

        let apnsKey = P256.Signing.PrivateKey()
        let fcmKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)

        try write(try caCert.serializeAsPEM().pemString + "\n", to: p["ca"]!)
        try write(caKey.pemRepresentation + "\n", to: p["caKey"]!, mode: 0o600)
        try write(try serverCert.serializeAsPEM().pemString + "\n", to: p["server"]!)
        try write(serverKey.pemRepresentation + "\n", to: p["serverKey"]!, mode: 0o600)
        try write(try clientCACert.serializeAsPEM().pemString + "\n", to: p["clientCA"]!)
        try write(clientCAKey.pemRepresentation + "\n", to: p["clientCAKey"]!, mode: 0o600)
        try write(try clientCert.serializeAsPEM().pemString + "\n", to: p["client"]!)
        try write(clientKey.pemRepresentation + "\n", to: p["clientKey"]!, mode: 0o600)
        try write(apnsKey.pemRepresentation + "\n", to: p["apns"]!, mode: 0o600)
        try write(fcmKey.pkcs8PEMRepresentation + "\n", to: p["fcm"]!, mode: 0o600)
        let p12OK = makeP12(
            cert: p["client"]!, key: p["clientKey"]!, chain: p["clientCA"]!, out: p["p12"]!,
            password: stored.clientP12Password)
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        try write(String(decoding: try enc.encode(stored), as: UTF8.self) + "\n", to: dir + "/credentials.json")

        return MockCredentials(
            stateDirectory: dir, caFile: p["ca"]!, caKeyFile: p["caKey"]!, serverCertificateFile: p["server"]!,
            serverKeyFile: p["serverKey"]!, clientCAFile: p["clientCA"]!, clientCertificateFile: p["client"]!,
            clientKeyFile: p["clientKey"]!, clientP12File: p12OK ? p["p12"]! : nil,
            clientP12Password: stored.clientP12Password,
            apnsKeyFile: p["apns"]!, apnsKeyID: stored.apnsKeyID, apnsTeamID: stored.apnsTeamID,
            apnsTopic: stored.apnsTopic, fcmKeyFile: p["fcm"]!, fcmProjectID: stored.fcmProjectID,
            fcmClientEmail: stored.fcmClientEmail, fcmPrivateKeyID: stored.fcmPrivateKeyID,
            apnsPublicKey: apnsKey.publicKey, fcmPublicKey: fcmKey.publicKey)
    }

    private static func makeCA(
        name: DistinguishedName, key: P256.Signing.PrivateKey, notBefore: Date,
        notAfter: Date
    ) throws -> Certificate {
        let pub = Certificate.PublicKey(key.publicKey)
        return try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: pub,
            notValidBefore: notBefore, notValidAfter: notAfter, issuer: name, subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: pub)
            },
            issuerPrivateKey: .init(key))
    }

    /// PKCS#12 via the openssl CLI (allowed by the brief; swift-certificates does not write PKCS#12).
    private static func makeP12(cert: String, key: String, chain: String, out: String, password: String) -> Bool {
        let candidates = ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"]
        guard let openssl = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            return false
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = [
            "pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", chain, "-out", out,
            "-name", "volley-mock-client", "-passout", "pass:" + password,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0 && FileManager.default.fileExists(atPath: out)
    }

    /// The FCM service-account JSON for a server listening on `host:port`.
    public func serviceAccountJSON(host: String, port: Int) throws -> String {
        let pem = try String(contentsOfFile: fcmKeyFile, encoding: .utf8)
        let object: [String: String] = [
            "type": "service_account",
            "project_id": fcmProjectID,
            "private_key_id": fcmPrivateKeyID,
            "private_key": pem,
            "client_email": fcmClientEmail,
            "client_id": "100000000000000000001",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": tokenURI(host: host, port: port),
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "universe_domain": "googleapis.com",
        ]
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try enc.encode(object), as: UTF8.self) + "\n"
    }

    public func tokenURI(host: String, port: Int) -> String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "https://\(h):\(port)/token"
    }

    /// Writes `service-account.json` for the port just bound.
    func writeServiceAccount(host: String, port: Int) throws {
        try Self.write(try serviceAccountJSON(host: host, port: port), to: serviceAccountFile, mode: 0o600)
    }

    /// Writes `endpoints.json` (absolute paths) and returns its text.
    @discardableResult
    func writeEndpoints(host: String, port: Int, requireClientCertificate: Bool) throws -> String {
        let h = host.contains(":") ? "[\(host)]" : host
        var json = "{\n"
        func field(_ k: String, _ v: String, last: Bool = false) -> String {
            "  \"\(k)\": \(MockJSONWriter.quote(v))\(last ? "" : ",")\n"
        }
        json += field("host", host)
        json += "  \"port\": \(port),\n"
        json += field("ca_file", caFile)
        json +=
            "  \"apns\": {\"p8_file\": \(MockJSONWriter.quote(apnsKeyFile)), \"key_id\": "
            + "\(MockJSONWriter.quote(apnsKeyID)), "
            + "\"team_id\": \(MockJSONWriter.quote(apnsTeamID)), \"topic\": \(MockJSONWriter.quote(apnsTopic)), "
            + "\"require_client_certificate\": \(requireClientCertificate)},\n"
        json +=
            "  \"fcm\": {\"service_account_file\": \(MockJSONWriter.quote(serviceAccountFile)), "
            + "\"project_id\": \(MockJSONWriter.quote(fcmProjectID)), "
            + "\"token_uri\": \(MockJSONWriter.quote(tokenURI(host: host, port: port)))},\n"
        json +=
            "  \"client_certificate\": {\"cert_file\": \(MockJSONWriter.quote(clientCertificateFile)), "
            + "\"key_file\": \(MockJSONWriter.quote(clientKeyFile)), "
            + "\"p12_file\": \(clientP12File.map(MockJSONWriter.quote) ?? "null"), "
            + "\"p12_password\": \(MockJSONWriter.quote(clientP12Password)), "
            + "\"ca_file\": \(MockJSONWriter.quote(clientCAFile))},\n"
        json += field("stats_url", "https://\(h):\(port)/_mock/stats")
        json += field("config_url", "https://\(h):\(port)/_mock/config")
        json += field("reset_stats_url", "https://\(h):\(port)/_mock/reset-stats", last: true)
        json += "}\n"
        try Self.write(json, to: endpointsFile)
        return json
    }
}

/// Why the mock could not start. Says what to fix.
public struct MockSetupError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
