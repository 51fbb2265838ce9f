import Foundation

/// The accept journal (`volley-mock --accept-journal FILE`): one line per accepted send, appended with one
/// `write(2)` on an `O_APPEND` descriptor at the moment the mock decides to accept, before the answer is written.
/// Nothing is buffered in the process, so the journal survives the mock being killed (`kill -9`): it is what a
/// provider had taken for delivery, answered or not, across restarts that append to the same file.
///
/// Lines: `apns <device token> <apns-id or ->` and `fcm <registration token>`. Tools count pushes per token from
/// it (`volley-bench chaos`: duplicates at the provider). A send costs one extra system call: for fault runs, not
/// for throughput benchmarks.
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

    /// Appends one APNs line; `token` and `apnsID` are the request's bytes.
    func recordAPNs(token: UnsafeBufferPointer<UInt8>, apnsID: UnsafeBufferPointer<UInt8>?) {
        var line: [UInt8] = []
        line.reserveCapacity(6 + token.count + 38)
        line.append(contentsOf: "apns ".utf8)
        line.append(contentsOf: token)
        line.append(UInt8(ascii: " "))
        if let apnsID { line.append(contentsOf: apnsID) } else { line.append(UInt8(ascii: "-")) }
        line.append(UInt8(ascii: "\n"))
        append(line)
    }

    /// Appends one FCM line; `token` is the registration token's UTF-8 (nil for a topic or condition: `-`).
    func recordFCM(token: UnsafeBufferPointer<UInt8>?) {
        var line: [UInt8] = []
        line.reserveCapacity(5 + (token?.count ?? 1))
        line.append(contentsOf: "fcm ".utf8)
        if let token { line.append(contentsOf: token) } else { line.append(UInt8(ascii: "-")) }
        line.append(UInt8(ascii: "\n"))
        append(line)
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
