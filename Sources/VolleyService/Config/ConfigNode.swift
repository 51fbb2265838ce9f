import Foundation
import VolleyCore
import Yams

/// A loosely typed configuration tree (what YAML gives) read with key paths, collecting every problem
/// instead of stopping at the first. Used only at startup.
struct ConfigReader {
    private(set) var problems: [String] = []
    let baseDirectory: URL?

    init(baseDirectory: URL?) { self.baseDirectory = baseDirectory }

    mutating func problem(_ path: String, _ message: String) { problems.append("\(path): \(message)") }

    /// Reports keys present in `node` that are not in `known` (typos are the commonest config bug).
    mutating func rejectUnknownKeys(_ node: [String: Any], known: Set<String>, at path: String) {
        for key in node.keys.sorted() where !known.contains(key) {
            let full = path.isEmpty ? key : "\(path).\(key)"
            let hint = KeySuggestion.closest(to: key, in: known).map { " (did you mean '\($0)'?)" } ?? ""
            problem(full, "unknown key\(hint)")
        }
    }

    mutating func section(_ node: [String: Any], _ key: String, at path: String) -> [String: Any]? {
        guard let value = node[key], !(value is NSNull) else { return nil }
        if let dict = value as? [String: Any] { return dict }
        problem(join(path, key), "must be a mapping")
        return nil
    }

    mutating func string(_ node: [String: Any], _ key: String, at path: String) -> String? {
        guard let value = node[key], !(value is NSNull) else { return nil }
        switch value {
        case let s as String: return s
        case let i as Int: return String(i)
        case let d as Double: return String(d)
        case let b as Bool: return String(b)
        default:
            problem(join(path, key), "must be a string")
            return nil
        }
    }

    mutating func int(_ node: [String: Any], _ key: String, at path: String, range: ClosedRange<Int>) -> Int? {
        guard let value = node[key], !(value is NSNull) else { return nil }
        let parsed: Int?
        switch value {
        case let i as Int: parsed = i
        case let s as String: parsed = Int(s.trimmingCharacters(in: .whitespaces))
        default: parsed = nil
        }
        guard let n = parsed else {
            problem(join(path, key), "must be an integer")
            return nil
        }
        guard range.contains(n) else {
            problem(join(path, key), "must be between \(range.lowerBound) and \(range.upperBound), got \(n)")
            return nil
        }
        return n
    }

    mutating func double(_ node: [String: Any], _ key: String, at path: String, min: Double) -> Double? {
        guard let value = node[key], !(value is NSNull) else { return nil }
        let parsed: Double?
        switch value {
        case let d as Double: parsed = d
        case let i as Int: parsed = Double(i)
        case let s as String: parsed = Double(s.trimmingCharacters(in: .whitespaces))
        default: parsed = nil
        }
        guard let n = parsed, n.isFinite else {
            problem(join(path, key), "must be a number")
            return nil
        }
        guard n >= min else {
            problem(join(path, key), "must be at least \(min), got \(n)")
            return nil
        }
        return n
    }

    mutating func bool(_ node: [String: Any], _ key: String, at path: String) -> Bool? {
        guard let value = node[key], !(value is NSNull) else { return nil }
        switch value {
        case let b as Bool: return b
        case let s as String where ["true", "yes", "1", "on"].contains(s.lowercased()): return true
        case let s as String where ["false", "no", "0", "off"].contains(s.lowercased()): return false
        default:
            problem(join(path, key), "must be true or false")
            return nil
        }
    }

    /// A file path: resolved against the configuration file's folder and checked to be readable.
    /// A readable file (not a folder), its path resolved against the configuration's folder. An empty value is a
    /// problem, not "the configuration's folder".
    mutating func file(_ node: [String: Any], _ key: String, at path: String) -> String? {
        guard let raw = string(node, key, at: path) else { return nil }
        if raw.trimmingCharacters(in: .whitespaces).isEmpty {
            problem(join(path, key), "must name a file (it is empty); leave the key out for the default")
            return nil
        }
        let resolved = resolve(raw)
        var isFolder: ObjCBool = false
        if !FileManager.default.isReadableFile(atPath: resolved)
            || (FileManager.default.fileExists(atPath: resolved, isDirectory: &isFolder) && isFolder.boolValue)
        {
            problem(join(path, key), "file not found or not readable: \(resolved)")
        }
        return resolved
    }

    /// A host name or address; an empty one is a problem naming the key (it would send every request nowhere).
    mutating func host(_ node: [String: Any], _ key: String, at path: String) -> String? {
        guard let raw = string(node, key, at: path) else { return nil }
        if raw.trimmingCharacters(in: .whitespaces).isEmpty {
            problem(join(path, key), "must name a host (it is empty); leave the key out for the default")
            return nil
        }
        return raw
    }

    func resolve(_ raw: String) -> String {
        let expanded = (raw as NSString).expandingTildeInPath
        if expanded.hasPrefix("/") { return expanded }
        guard let base = baseDirectory else { return expanded }
        return base.appendingPathComponent(expanded).standardizedFileURL.path
    }

    func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
}

/// Environment overrides: every scalar key path `a.b.cD` can be set with `VOLLEY_A_B_C_D`. Apps are addressed by
/// name: `apps[name=Test_App].apns.keyId` ← `VOLLEY_APPS_TEST_APP_APNS_KEY_ID`.
enum EnvironmentOverrides {
    static func envName(_ components: [String]) -> String {
        "VOLLEY_" + components.map(snake).joined(separator: "_")
    }

    /// `keyFile` → `KEY_FILE`, `Test_App` → `TEST_APP`, `volley:jobs` stays as a value, never a name.
    static func snake(_ s: String) -> String {
        var out = ""
        var previousLower = false
        for ch in s {
            if ch.isUppercase, previousLower { out.append("_") }
            if ch.isLetter || ch.isNumber { out.append(contentsOf: ch.uppercased()) } else { out.append("_") }
            previousLower = ch.isLowercase || ch.isNumber
        }
        return out
    }

    /// Sets `value` at `path` below `node`, making the subsections on the way.
    /// Keys whose value is a list of scalars: the variable holds the items separated by commas.
    static let listKeys: Set<String> = ["redis.cluster"]

    private static func set(_ value: Any, at path: ArraySlice<String>, in node: inout [String: Any]) {
        guard let key = path.first else { return }
        if path.count == 1 {
            node[key] = value
            return
        }
        var child = node[key] as? [String: Any] ?? [:]
        set(value, at: path.dropFirst(), in: &child)
        node[key] = child
    }

    /// Every variable name `apply` reads for `schema` (apps' keys aside, which take the app's name).
    static func names(schema: [String: [String]]) -> Set<String> {
        Set(
            schema.flatMap { section, keys in
                keys.map { envName([section] + $0.split(separator: ".").map(String.init)) }
            })
    }

    /// Applies overrides for the given schema (section → keys, a subsection's as `sub.key`) onto the tree, and
    /// returns the names it used.
    static func apply(
        to tree: inout [String: Any], schema: [String: [String]], appSchema: [String: [String]],
        environment: [String: String]
    ) -> [String] {
        var used: [String] = []
        for (section, keys) in schema {
            var node = tree[section] as? [String: Any] ?? [:]
            var changed = false
            for key in keys {
                // A key in a subsection (`tls.certFile` of `api`) is `VOLLEY_API_TLS_CERT_FILE`.
                let path = key.split(separator: ".").map(String.init)
                let name = envName([section] + path)
                if let value = environment[name] {
                    // A list of scalars (`redis.cluster`) is given with its items separated by commas.
                    let listed =
                        listKeys.contains("\(section).\(key)")
                        ? value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } as Any : value
                    set(listed, at: path[...], in: &node)
                    changed = true
                    used.append(name)
                }
            }
            if changed { tree[section] = node }
        }
        if var apps = tree["apps"] as? [Any] {
            for i in apps.indices {
                guard var app = apps[i] as? [String: Any], let appName = app["name"] as? String else { continue }
                for (sub, keys) in appSchema {
                    var node = app[sub] as? [String: Any] ?? [:]
                    var changed = false
                    for key in keys {
                        let name = envName(["apps", appName, sub, key])
                        if let value = environment[name] {
                            node[key] = value
                            changed = true
                            used.append(name)
                        }
                    }
                    if changed { app[sub] = node }
                }
                apps[i] = app
            }
            tree["apps"] = apps
        }
        return used
    }
}
