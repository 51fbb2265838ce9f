import Foundation

/// `deliverAtLocalTime: "HH:MM"`: a wall-clock time each recipient gets the notification at, in their own zone.
public struct LocalDeliveryTime: Sendable, Hashable, Codable, CustomStringConvertible {
    public let hour: Int
    public let minute: Int

    /// `HH:MM`, 24-hour, two digits each (`09:00`, `23:30`).
    public init?(_ text: String) {
        let b = Array(text.utf8)
        guard b.count == 5, b[2] == UInt8(ascii: ":"),
            b.indices.filter({ $0 != 2 }).allSatisfy({ b[$0] >= 48 && b[$0] <= 57 })
        else { return nil }
        let h = Int(b[0] - 48) * 10 + Int(b[1] - 48)
        let m = Int(b[3] - 48) * 10 + Int(b[4] - 48)
        guard h <= 23, m <= 59 else { return nil }
        hour = h
        minute = m
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let s = try c.decode(String.self)
        guard let t = LocalDeliveryTime(s) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "not HH:MM: \(s)")
        }
        self = t
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    public var description: String {
        (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
    }

    /// The first instant at or after `reference` whose wall-clock time in `zone` is this time, by `CivilTime`'s rule:
    /// a time that does not exist that day (the hour skipped when clocks go forward) is the moment of the change (the
    /// next valid minute), a time that happens twice (clocks go back) its first occurrence. Pure: the same inputs, the
    /// same instant.
    public func due(in zone: TimeZone, after reference: Date) -> Date {
        var day = CivilTime.wallClock(of: reference, in: zone).days
        // Today's time may have passed: tomorrow's is then the first; two days covers any offset change.
        for _ in 0..<3 {
            let instant = CivilTime.instant(of: CivilDateTime(days: day, hour: hour, minute: minute), in: zone)
            if instant >= reference { return instant }
            day += 1
        }
        return CivilTime.instant(of: CivilDateTime(days: day, hour: hour, minute: minute), in: zone)
    }
}

/// One delivery of a local-time job, deciding per device: due by now (sent by this delivery, unless an earlier wave
/// recorded it) or later (left for the wave at its due instant). Pure and cheap per device: each zone's due instant is
/// computed once per delivery.
///
/// Every delivery of the job (the first, each wave, any redelivery) resolves all its devices and decides again from
/// the same `reference`, so a wave sends exactly the devices due by its time that no earlier wave recorded, a device
/// registered since is picked up by the next wave, and the last wave's report counts every device once.
public struct LocalTimeWaves: Sendable {
    public let time: LocalDeliveryTime
    /// The instant due times count from: the job's `sendAt`, else when it was first added to the stream.
    public let reference: Date
    /// The zone of a device that registered none (the org's default, else UTC).
    public let fallbackZone: TimeZone
    /// Each zone's due instant, computed once per delivery; nil for a zone the system does not know.
    private var dueByZone: [String: Date?] = [:]
    private let fallbackDue: Date
    /// Devices found due later, by their due instant.
    public private(set) var later: [Date: Int] = [:]

    public init(time: LocalDeliveryTime, reference: Date, fallbackZone: TimeZone) {
        self.time = time
        self.reference = reference
        self.fallbackZone = fallbackZone
        fallbackDue = time.due(in: fallbackZone, after: reference)
    }

    /// The user attribute holding a user's zone in the directory (`volley directory import`): the zone of the
    /// user's devices that registered none.
    public static let userZoneAttribute = "timeZone"

    /// When `device` is due: at `time` in its registered zone, else in its user's zone from the directory
    /// (`userZone`), else in the fallback zone. A zone the system does not know counts as none.
    public mutating func due(_ device: Device, userZone: String? = nil) -> Date {
        due(inZone: device.timeZone) ?? due(inZone: userZone) ?? fallbackDue
    }

    /// The due instant in zone `id`, nil for no zone or one the system does not know.
    private mutating func due(inZone id: String?) -> Date? {
        guard let id else { return nil }
        if let known = dueByZone[id] { return known }
        let d = TimeZone(identifier: id).map { time.due(in: $0, after: reference) }
        dueByZone[id] = .some(d)
        return d
    }

    /// The devices of a chunk this delivery sends at `now` (with what earlier deliveries recorded for them); the
    /// others are counted into `later`. `recipients` holds the chunk's users' directory attributes, whose
    /// `timeZone` places the devices that registered no zone.
    public mutating func split(
        _ devices: [Device], recorded: [RecordedOutcome?], now: Date, recipients: [UserID: RecipientContext] = [:]
    ) -> (
        devices: [Device], recorded: [RecordedOutcome?]
    ) {
        var outDevices: [Device] = []
        var outRecorded: [RecordedOutcome?] = []
        outDevices.reserveCapacity(devices.count)
        outRecorded.reserveCapacity(devices.count)
        for (i, d) in devices.enumerated() {
            let r = i < recorded.count ? recorded[i] : nil
            // The user's zone is looked up only for a device without a usable zone of its own.
            let at =
                due(inZone: d.timeZone)
                ?? due(inZone: d.user.flatMap { recipients[$0]?.attributes?[Self.userZoneAttribute] }) ?? fallbackDue
            if at <= now || r != nil {
                outDevices.append(d)
                outRecorded.append(r)
            } else {
                later[at, default: 0] += 1
            }
        }
        return (outDevices, outRecorded)
    }

    /// The `wave` field of a wave's stream entry (the schedule's member carries it): `<reference ms>@<wave ms>`.
    public static func waveField(reference: Date, at: Date) -> String {
        let from = Int64((reference.timeIntervalSince1970 * 1000).rounded(.down))
        return "\(from)@\(Int64((at.timeIntervalSince1970 * 1000).rounded(.up)))"
    }

    /// The reference instant in a wave entry's `wave` field.
    public static func reference(fromWaveField field: String) -> Date? {
        guard let ms = field.split(separator: "@").first.flatMap({ Double($0) }) else { return nil }
        return Date(timeIntervalSince1970: ms / 1000)
    }

    /// The instant a wave entry's `wave` field says it falls due.
    public static func instant(fromWaveField field: String) -> Date? {
        let parts = field.split(separator: "@")
        guard parts.count == 2, let ms = Double(parts[1]) else { return nil }
        return Date(timeIntervalSince1970: ms / 1000)
    }

    /// The waves of a delivery decided by `gate`.
    public init(_ gate: LocalTimeGate) {
        self.init(time: gate.time, reference: gate.reference, fallbackZone: gate.fallbackZone)
    }

    /// When a recipient is due: at the first of `devices`' instants (the first push the person gets), else, for a
    /// user without a device, at `time` in the user's zone (`userZone`, the directory's `timeZone`), else in the
    /// fallback zone. The recipient's inbox entry, unseen count and cap decision are written at this instant.
    public mutating func due(devices: [Device], userZone: String?) -> Date {
        var first: Date?
        for d in devices {
            let at = due(inZone: d.timeZone) ?? due(inZone: userZone) ?? fallbackDue
            if first.map({ at < $0 }) ?? true { first = at }
        }
        return first ?? due(inZone: userZone) ?? fallbackDue
    }

    /// Counts recipients without a device into `later` (by their due instant), so a wave is parked for them too:
    /// their inbox entries are written when it comes.
    public mutating func waitFor(_ recipients: [Date: Int]) {
        for (at, n) in recipients { later[at, default: 0] += n }
    }

    /// Devices (and recipients without one) waiting for a later wave.
    public var waiting: Int { later.values.reduce(0, +) }
    /// The next wave's instant.
    public var nextDue: Date? { later.keys.min() }
}

/// What the recipient step needs of one delivery of a local-time job: the rule of its due times and the instant the
/// delivery decides at. With it, each recipient's inbox entry, unseen count and frequency-cap decision are written at
/// that recipient's wave (`LocalTimeWaves.due(devices:userZone:)`), not at the job's first: no tray shows the
/// notification before its push. The delivery splits its devices at the same `asOf`, so a device sent by a delivery
/// always belongs to a recipient that delivery stored.
public struct LocalTimeGate: Sendable, Hashable {
    public var time: LocalDeliveryTime
    public var reference: Date
    public var fallbackZone: TimeZone
    /// A recipient or device due at or before this instant is this delivery's.
    public var asOf: Date

    public init(time: LocalDeliveryTime, reference: Date, fallbackZone: TimeZone, asOf: Date) {
        self.time = time
        self.reference = reference
        self.fallbackZone = fallbackZone
        self.asOf = asOf
    }
}

/// The orgs' default zones set through the API (`/v1/time-zone`), which take the place of the configuration's
/// `orgs[].timeZone` for local-time jobs. A zone is an IANA name the system knows.
public protocol OrgTimeZoneRepository: Sendable {
    /// The org's zone set through the API, nil when none is.
    func zone(org: OrgID) async throws -> String?
    func setZone(org: OrgID, _ zone: String) async throws
    /// Removes the org's zone, so the configuration's holds again; true when there was one.
    func removeZone(org: OrgID) async throws -> Bool
}
