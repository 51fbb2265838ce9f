import Glibc
import VolleyCore

/// The kernel's random bytes (`getrandom`, through glibc's `arc4random_buf`), read 4 KiB at a time for the ids the
/// API generates: one system call per 256 job ids instead of the two per id that `SystemRandomNumberGenerator` makes
/// (one per 64-bit word), which cost about 1 % of the API's CPU on a job POST. The bytes are the kernel generator's
/// own, and each is handed out once.
enum KernelRandom {
    private static let pool = NSLockedBox(Pool())

    /// A generated job id (`JobID.generated`) from the pool.
    static func jobID() -> JobID {
        var rng = Generator()
        return JobID.generated(using: &rng)
    }

    /// The pool as a `RandomNumberGenerator`.
    struct Generator: RandomNumberGenerator {
        mutating func next() -> UInt64 { KernelRandom.pool.withLocked { $0.next() } }
    }

    private struct Pool {
        var words = [UInt64](repeating: 0, count: 512)
        var used = 512

        /// 64 bits, refilled from the kernel when all were handed out.
        mutating func next() -> UInt64 {
            if used == words.count {
                // glibc's arc4random_buf calls getrandom for the whole buffer, again after an interruption.
                words.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
                used = 0
            }
            defer { used += 1 }
            return words[used]
        }
    }
}
