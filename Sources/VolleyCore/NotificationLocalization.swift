/// Choosing the per-language variant of a notification for a device's locale. Both providers encode one
/// payload per variant (per job), and pick the variant per device with `variantKey(for:)`.
extension Notification {
    /// Normalised locale: lower-case, `_` → `-` ("pt_BR" → "pt-br").
    public static func normalizeLocale(_ locale: String) -> String {
        String(locale.lowercased().map { $0 == "_" ? "-" : $0 })
    }

    /// The key of `localized` to use for a device locale: the exact locale, then the device's language
    /// ("es-MX" → "es"), then another variant of the same language (sorted, so deterministic);
    /// nil → the default title/subtitle/body.
    public func variantKey(for locale: String?) -> String? {
        guard let locale, let localized, !localized.isEmpty else { return nil }
        let wanted = Self.normalizeLocale(locale)
        let keys = localized.keys.sorted()
        if let k = keys.first(where: { Self.normalizeLocale($0) == wanted }) { return k }
        let language = wanted.split(separator: "-", maxSplits: 1).first.map(String.init) ?? wanted
        if let k = keys.first(where: { Self.normalizeLocale($0) == language }) { return k }
        if let k = keys.first(where: {
            Self.normalizeLocale($0).split(separator: "-", maxSplits: 1).first.map(String.init) == language
        }) {
            return k
        }
        return nil
    }

    /// Title/subtitle/body for a variant: each field from the variant, falling back to the default.
    public func text(variant key: String?) -> LocalizedText {
        let v = key.flatMap { localized?[$0] }
        return LocalizedText(title: v?.title ?? title, subtitle: v?.subtitle ?? subtitle, body: v?.body ?? body)
    }
}
