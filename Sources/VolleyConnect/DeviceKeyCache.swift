import Synchronization
import VolleyCore

/// Device keys parsed once per worker process: the encrypted path (a Notification Builder push to a device that
/// registered a key) asks here instead of parsing the key again for every job. One cache is shared by every lane
/// and every job of the worker, behind one lock held only to look up and to insert (parsing happens outside it).
///
/// Bounded: at most `capacity` parsed keys (`worker.deviceKeyCacheSize`). Two generations of at most
/// `capacity / 2` entries each: a lookup finds a key in either; a key found only in the older one is copied into the
/// newer; when the newer is full it becomes the older and the older is dropped whole. So the keys used since the
/// last turn stay, a campaign to more devices than `capacity` parses each key it meets at most once per turn, and
/// memory never holds more than `capacity` keys whatever the audience (one entry, the key's text and the parsed
/// public key, measured at about 5.4 KB of RSS for RSA-2048: 10,000 keys ≈ 55 MB).
public final class DeviceKeyCache: Sendable {
    /// What a key parses to: the key, or why it does not (the device then gets nothing in clear).
    public enum Entry: Sendable {
        case key(DeviceEncryptionKey)
        case invalid(String)
    }

    /// `worker.deviceKeyCacheSize`'s default.
    public static let defaultCapacity = 10_000

    struct ID: Hashable, Sendable {
        var material: DeviceKeyMaterial
        var platform: Platform
    }

    struct State {
        var newer: [ID: Entry] = [:]
        var older: [ID: Entry] = [:]
        var parses = 0
    }

    public let capacity: Int
    private let generation: Int
    private let state = Mutex(State())

    /// `capacity`: the most parsed keys held at once (at least 2).
    public init(capacity: Int = DeviceKeyCache.defaultCapacity) {
        self.capacity = max(2, capacity)
        generation = self.capacity / 2
    }

    /// The key `material` parses to for a device on `platform`, parsed at most once while it stays in the cache.
    public func key(_ material: DeviceKeyMaterial, platform: Platform) -> Entry {
        let id = ID(material: material, platform: platform)
        let found: Entry? = state.withLock { s in
            if let e = s.newer[id] { return e }
            guard let e = s.older[id] else { return nil }
            s.insert(id, e, generation: generation)
            return e
        }
        if let found { return found }
        let entry: Entry
        do {
            entry = .key(
                try DeviceEncryptionKey(
                    rsaPublicKey: material.rsaPublicKey, cipherName: material.cipherName, platform: platform))
        } catch {
            entry = .invalid("the device's registered key does not parse: \(error)")
        }
        state.withLock { s in
            s.parses += 1
            s.insert(id, entry, generation: generation)
        }
        return entry
    }

    /// Parsed keys held now (at most `capacity`).
    public var count: Int { state.withLock { $0.newer.count + $0.older.count } }
    /// Keys parsed since the cache was made (each miss parses once).
    public var parses: Int { state.withLock { $0.parses } }
}

extension DeviceKeyCache.State {
    mutating func insert(_ id: DeviceKeyCache.ID, _ e: DeviceKeyCache.Entry, generation: Int) {
        newer[id] = e
        if newer.count >= generation {
            older = newer
            newer = [:]
        }
    }
}
