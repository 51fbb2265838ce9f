import VolleyCore

/// The unknown keys of one JSON line of an import, as the problem to report for that line ("unknown key 'activ'
/// (did you mean 'active'?)"), or nil when it has none or is not a JSON object (decoding then says why).
func unknownKeysProblem(_ line: String, known: Set<String>) -> String? {
    guard case .object(let object)? = try? JSONValue(parsing: line) else { return nil }
    let unknown = JobKeys.unknownKeys(in: object, known: known)
    if unknown.isEmpty { return nil }
    return (unknown.count == 1 ? "unknown key " : "unknown keys ") + unknown.map(\.description).joined(separator: ", ")
}
