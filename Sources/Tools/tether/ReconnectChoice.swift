/// The `--reconnect` option both client commands take: no automatic reconnect, the protocol's
/// default schedule, or the tiered one (5 tries every 3 s, 5 every 9 s, 5 every 15 s, then stop).
enum ReconnectChoice: String {
    case none
    case `default`
    case tiered

    /// The usage error for a value that is not one of the choices.
    static let usage = "--reconnect takes none, default or tiered"
}
