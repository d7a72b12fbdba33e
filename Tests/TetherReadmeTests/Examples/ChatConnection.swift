import TetherXMPPClient

/// The app's chat connection: connected after login, pinging every 20 s, reconnecting on its own.
final class ChatConnection: Sendable {
    let client: XMPPClient

    /// `server`: nil connects to the JID's domain; `options`: for example a private CA's file.
    /// Throws when the client could never connect (TLS required on a platform without TLS).
    init(
        jid: JID,
        password: Secret,
        server: Endpoint? = nil,
        options: XMPPClient.Options = .init()
    ) throws(XMPPClientError) {
        var configuration = XMPPClient.Configuration(jid: jid, password: password, endpoint: server)
        configuration.state = keychain.savedState ?? XMPPClientState()  // FAST token, archive position
        configuration.autoPing = .init(interval: .seconds(20), timeout: .seconds(10), maximumMissed: 2)
        configuration.reconnectPolicy = .tiered(repeats: false)  // ~5×3 s, 5×9 s, 5×15 s (±50 %), then wait
        client = try XMPPClient(configuration: configuration, options: options)
        client.setEventHandler(queue: .main) { event in
            switch event {
            case .lifecycle(.connected(let jid)): ui.show("online as \(jid)")  // a new session: join rooms here
            case .lifecycle(.resumed): ui.show("online")  // stream management resumed it: nothing lost
            case .lifecycle(.connectionLost(let error)): ui.show("offline: \(error.message)")
            case .lifecycle(.reconnecting(let attempt, let delay, _)): ui.show("retry \(attempt) in \(delay)")
            case .lifecycle(.suspended): ui.show("offline; tap to retry")  // reconnectNow() tries again
            case .message(let message):
                if let body = message.body { ui.show("\(message.from?.description ?? "server"): \(body)") }
            case .roster(let roster): ui.show("\(roster.items.count) contacts")
            case .stateChanged(let state): keychain.savedState = state  // for the next launch
            case .caughtUp(let count, _): ui.show("\(count) messages while away")  // from the archive
            case .unacknowledgedStanzas(let stanzas): outbox.keep(stanzas)  // never dropped silently
            default: break
            }
        }
    }

    func logIn() async {
        do {
            try await client.connect()  // connected, or the error that stopped it
        } catch {
            switch error.kind {
            case .authenticationFailed: ui.show("wrong password")
            case .certificateRefused: ui.show("the server's certificate was refused")
            default: ui.show("cannot connect: \(error.message)")
            }
        }
    }

    func send(_ text: String, to contact: JID) async throws(XMPPClientError) {
        try await client.send(XMPPMessage(to: contact, body: text))  // queued while offline
    }

    /// The user tapped "retry", the app came to the foreground, or the network is back.
    func retry() {
        client.reconnectNow()
    }
}
