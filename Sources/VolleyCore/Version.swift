/// Volley's release version (semantic versioning; CHANGELOG.md lists what each release changed).
public enum VolleyVersion {
    public static let current = "0.2.0"
}
