import Foundation
import Logging
import Testing
import VolleyTestTags

@testable import VolleyService

// worker.cpuWakeLatencyUs and `--cpu-wake-latency-us`: the config key and the PM QoS request against the real device.

@Test(.tags(.unit)) func cpuWakeLatencyIsUnsetByDefaultAndReadFromTheFileAndTheEnvironment() throws {
    #expect(
        try VolleyConfiguration.parse(yaml: "worker: {inFlight: 10}", baseDirectory: nil).worker.cpuWakeLatencyUs == nil
    )
    #expect(
        try VolleyConfiguration.parse(yaml: "worker: {cpuWakeLatencyUs: 0}", baseDirectory: nil).worker.cpuWakeLatencyUs
            == 0)
    let env = ["VOLLEY_WORKER_CPU_WAKE_LATENCY_US": "25"]
    #expect(try VolleyConfiguration.parse(yaml: "", baseDirectory: nil, environment: env).worker.cpuWakeLatencyUs == 25)
}

@Test(.tags(.unit)) func aBadCPUWakeLatencyStopsStartupNamingTheKey() {
    for bad in ["-1", "2000000", "soon"] {
        do {
            _ = try VolleyConfiguration.parse(yaml: "worker: {cpuWakeLatencyUs: \(bad)}", baseDirectory: nil)
            Issue.record("worker.cpuWakeLatencyUs: \(bad) was accepted")
        } catch let e as ConfigurationError {
            #expect(e.problems.count == 1)
            #expect(e.problems.first?.contains("worker.cpuWakeLatencyUs") == true, "\(e.problems)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }
}

@Test(.tags(.unit)) func aMissingDeviceIsAnErrorNamingItAndTheWorkerRunsOnWithoutIt() throws {
    // The worker's path (`worker.cpuWakeLatencyUs`): a warning and no request, not a stop.
    let logger = Logger(label: "test")
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("no-such-\(UUID().uuidString)").path
    do {
        _ = try CPUWakeLatencyRequest(microseconds: 0, path: path)
        Issue.record("a request on a missing device was held")
    } catch {
        #expect(error.description.contains(path))
        #expect(error.description.contains("0 µs"))
    }
    #expect(throws: CPUWakeLatencyError.self) { try CPUWakeLatencyRequest(microseconds: -1, path: path) }
    #expect(CPUWakeLatencyRequest.currentTarget(path: path) == nil)
    #expect(CPUWakeLatencyRequest.holdConfigured(0, key: "worker.cpuWakeLatencyUs", logger: logger, path: path) == nil)
    // Unset: nothing is opened at all.
    #expect(try CPUWakeLatencyRequest.hold(nil) == nil)
    #expect(CPUWakeLatencyRequest.holdConfigured(nil, key: "worker.cpuWakeLatencyUs", logger: logger) == nil)
}

private var deviceWritable: Bool { access(CPUWakeLatencyRequest.devicePath, W_OK) == 0 }

/// On the real device (CI runs as root): the kernel enforces the strictest request while it is held, and forgets
/// it on release. 7 µs is a value nothing else on a test machine asks for.
@Test(.tags(.unit), .enabled(if: deviceWritable, "needs a writable /dev/cpu_dma_latency (root)"))
func aHeldRequestIsEnforcedByTheKernelUntilReleased() throws {
    let before = try #require(CPUWakeLatencyRequest.currentTarget())
    let request = try CPUWakeLatencyRequest(microseconds: 7)
    #expect(request.isHeld)
    let held = try #require(CPUWakeLatencyRequest.currentTarget())
    #expect(held <= 7)
    request.release()
    request.release() // idempotent
    #expect(!request.isHeld)
    // Our 7 µs is gone. (Not "back to before": another process may take a request of its own meanwhile.)
    let after = try #require(CPUWakeLatencyRequest.currentTarget())
    #expect(after != 7 || before == 7, "before \(before), after \(after)")
}
