// A Linux PM QoS CPU latency request (/dev/cpu_dma_latency): the one place Volley asks the kernel how deep its
// idle CPUs may sleep. Everything here is open/write/read/close on that device.
import Foundation
import Logging

/// While held, the cpuidle governor picks only idle states that wake within `microseconds`
/// (Documentation/power/pm_qos_interface.rst). The request is system-wide and lasts until `release()`, `deinit`
/// or process exit (the kernel drops it when the file closes); the strictest request of all holders wins.
///
/// Why Volley has it: on a virtual machine whose idle state is a halt that exits to the hypervisor (KVM/Firecracker
/// guests with `haltpoll.guest_halt_poll_ns=0`, as on this project's build machines), a wake-up of an idle vCPU
/// costs from about a hundred microseconds to several hundred, as the host's load decides. An HTTP/2 round trip has
/// at least three (the server's timer, the client's read, the server's read). At 20 ms and 1,000 streams in a slow
/// spell the same binary spent 3.4 ms per request above the server's latency with halting vCPUs and 0.6 ms with
/// polling ones: 85 % against 97 % of the connection's Little's-law bound (docs/tuning.md, "Idle wake-ups").
/// A request of 0 keeps idle CPUs in the polling state instead; it costs idle CPU time (not the process's), never
/// correctness. Off unless asked for.
public final class CPUWakeLatencyRequest: @unchecked Sendable {
    public static let devicePath = "/dev/cpu_dma_latency"
    /// What the request asked for.
    public let microseconds: Int
    public let path: String
    // Set once in init; `release` (from any thread) closes it under `lock`.
    private var fd: Int32
    private let lock = NSLock()

    /// Opens the device and writes the request (a native-endian Int32, as the kernel reads it).
    /// Throws when the device is missing or not writable (containers without it, non-root), naming both.
    public init(microseconds: Int, path: String = CPUWakeLatencyRequest.devicePath) throws(CPUWakeLatencyError) {
        guard (0...Int(Int32.max)).contains(microseconds) else {
            throw CPUWakeLatencyError("a CPU wake-up latency must be 0…\(Int32.max) µs, got \(microseconds)")
        }
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let why = String(cString: strerror(errno))
            throw CPUWakeLatencyError(
                "cannot open \(path) to hold a CPU wake-up latency of \(microseconds) µs: \(why) "
                    + "(on most systems only root may write it; in a container, pass the device in and run as root)")
        }
        var value = Int32(microseconds)
        let written = withUnsafeBytes(of: &value) { write(fd, $0.baseAddress, $0.count) }
        guard written == MemoryLayout<Int32>.size else {
            let why = String(cString: strerror(errno))
            close(fd)
            throw CPUWakeLatencyError("cannot write a CPU wake-up latency of \(microseconds) µs to \(path): \(why)")
        }
        self.fd = fd
        self.microseconds = microseconds
        self.path = path
    }

    /// Drops the request (idempotent).
    public func release() {
        lock.lock()
        defer { lock.unlock() }
        if fd >= 0 {
            close(fd)
            fd = -1
        }
    }

    public var isHeld: Bool {
        lock.lock()
        defer { lock.unlock() }
        return fd >= 0
    }

    deinit { if fd >= 0 { close(fd) } }

    /// The latency the kernel currently enforces (the strictest request held by anyone), in µs; nil when the device
    /// cannot be read. With no request held, Linux reports 2,000,000,000.
    public static func currentTarget(path: String = devicePath) -> Int? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var value: Int32 = 0
        let n = withUnsafeMutableBytes(of: &value) { read(fd, $0.baseAddress, $0.count) }
        return n == MemoryLayout<Int32>.size ? Int(value) : nil
    }

    /// Holds a request when `microseconds` is set; nil otherwise.
    public static func hold(_ microseconds: Int?) throws(CPUWakeLatencyError) -> CPUWakeLatencyRequest? {
        guard let microseconds else { return nil }
        return try CPUWakeLatencyRequest(microseconds: microseconds)
    }

    /// For a long-running process configured with `key`: holds the request and logs it, or logs a warning naming
    /// the key when the host refuses (a performance setting on a host without the device is not a reason to stop).
    public static func holdConfigured(
        _ microseconds: Int?, key: String, logger: Logger,
        path: String = devicePath
    ) -> CPUWakeLatencyRequest? {
        guard let microseconds else { return nil }
        do {
            let r = try CPUWakeLatencyRequest(microseconds: microseconds, path: path)
            logger.info(
                "holding a CPU wake-up latency request",
                metadata: [
                    "key": "\(key)", "microseconds": "\(microseconds)", "device": "\(r.path)",
                ])
            return r
        } catch {
            logger.warning(
                "\(key) is set but cannot be held; running with the system's idle states",
                metadata: [
                    "key": "\(key)", "reason": "\(error.description)",
                ])
            return nil
        }
    }
}

/// Why a CPU wake-up latency request could not be held; says which device and what to do.
public struct CPUWakeLatencyError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
