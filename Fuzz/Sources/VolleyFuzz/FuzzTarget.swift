import Foundation
import VolleyConnect
import VolleyCore

/// libFuzzer's driver, entered from this executable's own `main` (SwiftPM names an executable's entry point itself,
/// so libFuzzer's `main` cannot be the one): it parses libFuzzer's flags and calls `fuzzOneInput` per input.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@main
enum VolleyFuzz {
    static func main() {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runFuzzerDriver(&argc, &argv, fuzzOneInput))
    }
}

/// One libFuzzer input: read it the way Volley reads untrusted JSON, and check what must hold for any input.
/// A crash, a sanitizer report or a broken invariant (`precondition`) is a finding; an error thrown for bad input
/// is the expected answer. Exported under libFuzzer's name too, which its runtime refers to.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    readAsJob(bytes)
    readAsSalesforceBody(Data(bytes))
    return 0
}

/// The worker's and the API's reading of a job: the tree, the unknown-key walk, the typed job.
func readAsJob(_ bytes: UnsafeRawBufferPointer) {
    guard let value = try? JSONValue(parsing: bytes) else { return }
    // What Volley writes of a tree reads back as the same tree, numbers digit for digit.
    let written = value.encoded()
    guard let reread = try? JSONValue(parsing: written) else {
        preconditionFailure("encoded() wrote text its own parser refuses: \(String(decoding: written, as: UTF8.self))")
    }
    precondition(reread == value, "encoded() changed the value: \(String(decoding: written, as: UTF8.self))")
    guard case .object(let object) = value else { return }
    _ = JobKeys.unknownKeys(in: object)
    if let job = try? PushJob(json: value, defaultOrg: "org") {
        _ = job.notification.text(variant: nil)
    }
}

/// The Salesforce-compatible resources' readings of a request body.
func readAsSalesforceBody(_ body: Data) {
    _ = try? ConnectPush.decode(body)
    if let inputs = try? CustomNotificationAction.inputs(body) {
        for input in inputs { _ = CustomNotificationAction.decode(input) }
    }
}
