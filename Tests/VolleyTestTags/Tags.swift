import Testing

extension Tag {
    /// Pure logic in one process: no socket, no child process, no Redis. `tools/test --unit` runs these first.
    @Tag public static var unit: Self
    /// Real parts: redis-server, the mock over TLS, `volley` processes, the API over HTTP. `tools/test` runs these
    /// after the unit lane passes.
    @Tag public static var integration: Self
}
