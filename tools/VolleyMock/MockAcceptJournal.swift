import Foundation
import VolleyCore

/// The accept journal (`volley-mock --accept-journal FILE`): one line per accepted send, appended with one
/// `write(2)` on an `O_APPEND` descriptor at the moment the mock decides to accept, before the answer is written.
/// Nothing is buffered in the process, so the journal survives the mock being killed (`kill -9`): it is what a
/// provider had taken for delivery, answered or not, across restarts that append to the same file.
///
/// Lines: `apns <device token> <apns-id or -> <apns-collapse-id or ->` and `fcm <registration token> <identity>`,
/// where an FCM message's identity is `tag:<android.notification.tag>`, else `mid:<data.mid>` (the message id an
/// app that renders a data message de-duplicates on), else `-`. Tools count pushes per token from it, and whether
/// a device's second push carried its first one's identity (`volley-bench chaos`: duplicates at the provider,
/// shown twice). A send costs one extra system call (and, for FCM, a parse of its body): for fault runs, not for
/// throughput benchmarks.
public final class MockAcceptJournal: Sendable {
    let fd: Int32
    public let path: String

    public init(path: String) throws {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw MockSetupError("--accept-journal \(path): cannot open for appending (errno \(errno))")
        }
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// Appends one APNs line; `token`, `apnsID` and `collapseID` are the request's bytes.
    func recordAPNs(
        token: UnsafeBufferPointer<UInt8>, apnsID: UnsafeBufferPointer<UInt8>?, collapseID: UnsafeBufferPointer<UInt8>?
    ) {
        var line: [UInt8] = []
        line.reserveCapacity(7 + token.count + 38 + (collapseID?.count ?? 1))
        line.append(contentsOf: "apns ".utf8)
        line.append(contentsOf: token)
        line.append(UInt8(ascii: " "))
        if let apnsID { line.append(contentsOf: apnsID) } else { line.append(UInt8(ascii: "-")) }
        line.append(UInt8(ascii: " "))
        Self.appendWord(collapseID.map { Array($0) }, to: &line)
        line.append(UInt8(ascii: "\n"))
        append(line)
    }

    /// Appends one FCM line; `token` is the registration token's UTF-8 (nil for a topic or condition: `-`), `body`
    /// the send's body (its identity is read from it).
    func recordFCM(token: UnsafeBufferPointer<UInt8>?, body: [UInt8]) {
        var line: [UInt8] = []
        line.reserveCapacity(6 + (token?.count ?? 1) + 40)
        line.append(contentsOf: "fcm ".utf8)
        if let token { line.append(contentsOf: token) } else { line.append(UInt8(ascii: "-")) }
        line.append(UInt8(ascii: " "))
        Self.appendWord(Self.fcmIdentity(body).map { Array($0.utf8) }, to: &line)
        line.append(UInt8(ascii: "\n"))
        append(line)
    }

    /// An FCM message's identity on the device: `tag:` and `android.notification.tag`, else `mid:` and `data.mid`.
    static func fcmIdentity(_ body: [UInt8]) -> String? {
        guard let message = (try? JSONValue(parsing: body))?.objectValue?["message"]?.objectValue else { return nil }
        if let tag = message["android"]?.objectValue?["notification"]?.objectValue?["tag"]?.stringValue {
            return "tag:" + tag
        }
        if let mid = message["data"]?.objectValue?["mid"]?.stringValue { return "mid:" + mid }
        return nil
    }

    /// One word of a line: the bytes with spaces and line breaks as `_` (a line stays one line of fields), or `-`.
    static func appendWord(_ bytes: [UInt8]?, to line: inout [UInt8]) {
        guard let bytes, !bytes.isEmpty else {
            line.append(UInt8(ascii: "-"))
            return
        }
        for b in bytes { line.append(b == 0x20 || b == 0x0A || b == 0x0D ? UInt8(ascii: "_") : b) }
    }

    /// One write: with `O_APPEND` each line lands whole at the end of the file, whichever connection queue writes.
    private func append(_ line: [UInt8]) {
        line.withUnsafeBytes { b in
            guard let base = b.baseAddress else { return }
            var offset = 0
            while offset < b.count {
                let n = write(fd, base + offset, b.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}
