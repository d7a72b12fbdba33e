import Foundation
import Testing
import TetherCore
import TetherDispatch
import TetherTestServers
import TetherTestSupport
import TetherXML
import TetherXMPP
import TetherXMPPClient

/// Nothing lost beyond stream management's window, against prosody 13: the catch-up from the
/// archive (`mam`, with the offline store on) at a new session; carbons (`carbons`) inside the
/// Bind 2 login; push (`cloud_notify`) reaching a stand-in app server (an XMPP entity of its own,
/// as a real app server is) for a hibernated session and for an offline account.
@Suite(
    .serialized,
    .timeLimit(.minutes(3)),
    .realServers(.prosody, .opensslCommand)
)
struct XMPPArchiveTests {
    static let modules = [
        "sasl2", "sasl2_bind2", "sasl2_sm", "sasl2_fast", "mam", "offline", "carbons", "cloud_notify",
    ]
    static let accounts = [("alice", "alicepass"), ("bob", "bobpass"), ("pushapp", "pushapppass")]

    static func server() async throws -> (ProsodyServer, TestCertificates) {
        let certificates = try TestCertificates.shared()
        let server = try ProsodyServer(
            accounts: accounts,
            certificates: certificates,
            extraModules: modules,
            extraConfiguration: "default_archive_policy = true"
        )
        try await server.start()
        return (server, certificates)
    }

    /// Alice over direct TLS with SASL2 (as a current mobile client connects), or, `sasl2` false,
    /// the RFC 6120 way on the same server.
    static func alice(_ server: ProsodyServer, port: Int? = nil, sasl2: Bool = true) -> XMPPClient.Configuration {
        var configuration = testConfiguration("alice", port: port ?? server.directTLSPort!)
        configuration.tls = .direct
        configuration.sasl2 = sasl2
        configuration.archiveCatchUp = .init(pageSize: 2)
        return configuration
    }

    static func messages(_ events: [XMPPClient.Event]) -> [XMPPMessage] {
        events.compactMap { if case .message(let message) = $0 { message } else { nil } }
    }

    @Test(arguments: [true, false])
    func aNewSessionCatchesUpFromTheArchive(sasl2: Bool) async throws {
        let (server, certificates) = try await Self.server()
        let options = XMPPClient.Options(caFile: certificates.caCertificate)
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port), options: options)
        try await bob.connect()

        // First launch: no position; a message while online starts one (its stanza id).
        let first = try XMPPClient(configuration: Self.alice(server, sasl2: sasl2), options: options)
        let firstEvents = EventRecorder(first)
        try await first.connect()
        try await bob.send(XMPPMessage(to: JID("alice@localhost"), body: "while online"))
        try await bob.flush()
        #expect(await firstEvents.wait { $0.contains { if case .message = $0 { true } else { false } } })
        let saved = await first.clientState()
        let position = try #require(saved.archivePosition, "\(firstEvents.events)")
        #expect((saved.fastToken != nil && saved.userAgentID != nil) == sasl2)
        #expect(firstEvents.events.contains(.stateChanged(saved)))
        await first.disconnect()

        // Offline: five messages go to the archive (and the offline store).
        for n in 1...5 { try await bob.send(XMPPMessage(to: JID("alice@localhost"), body: "away \(n)")) }
        try await bob.flush()

        // The next launch, with the saved state (as the app would decode it from its keychain):
        // the token logs in, the catch-up pages through the archive (2 per page) in order.
        var configuration = Self.alice(server, sasl2: sasl2)
        configuration.state = try JSONDecoder().decode(XMPPClientState.self, from: JSONEncoder().encode(saved))
        if sasl2 { configuration.password = "not-the-password" }  // the token logs in
        let second = try XMPPClient(configuration: configuration, options: options)
        let events = EventRecorder(second)
        try await second.connect()
        #expect(await second.authentication()?.fast == sasl2)
        #expect(
            await events.wait { $0.contains { if case .caughtUp = $0 { true } else { false } } },
            "\(events.events)"
        )
        #expect(events.events.contains(.caughtUp(count: 5, complete: true)), "\(events.events)")
        // While the catch-up ran, a live message came: after the archive's.
        try await bob.send(XMPPMessage(to: JID("alice@localhost"), body: "now"))
        try await bob.flush()
        #expect(await events.wait { Self.messages($0).contains { $0.body == "now" } })
        _ = await steadyCount(of: { events.events.count }, quiet: .seconds(1))
        let delivered = Self.messages(events.events)
        // Exactly once each (the offline store's copies are not delivered again), in order.
        #expect(delivered.map(\.body) == ["away 1", "away 2", "away 3", "away 4", "away 5", "now"], "\(delivered)")
        #expect(delivered.prefix(5).allSatisfy(\.isArchived) && !delivered[5].isArchived)
        let final = await second.clientState()
        #expect(
            final.archivePosition != position
                && final.archivePosition?.id == delivered[5].stanzaID(by: JID("alice@localhost")!)
        )
        await second.disconnect()
        await bob.disconnect()
    }

    /// A first launch (no archive position) still gets what the offline store holds: its query
    /// for the latest archive id goes after the initial presence (prosody holds the offline store
    /// back from a session that asked the archive first), and the stored message's archive id
    /// becomes the position.
    @Test func aFirstLaunchGetsTheOfflineStore() async throws {
        let (server, certificates) = try await Self.server()
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port))
        try await bob.connect()
        try await bob.send(XMPPMessage(to: JID("alice@localhost"), body: "before the first launch"))
        try await bob.flush()
        let alice = try XMPPClient(
            configuration: Self.alice(server),
            options: XMPPClient.Options(caFile: certificates.caCertificate)
        )
        let events = EventRecorder(alice)
        try await alice.connect()
        #expect(
            await events.wait { Self.messages($0).contains { $0.body == "before the first launch" } },
            "\(events.events)"
        )
        let stored = try #require(Self.messages(events.events).first)
        #expect(await alice.clientState().archivePosition?.id == stored.stanzaID(by: JID("alice@localhost")!))
        #expect(!events.events.contains { if case .caughtUp = $0 { true } else { false } })
        await alice.disconnect()
        await bob.disconnect()
    }

    @Test(arguments: [true, false])
    func carbonCopiesOfTheOtherClients(sasl2: Bool) async throws {
        let (server, certificates) = try await Self.server()
        let options = XMPPClient.Options(logLevel: .trace, caFile: certificates.caCertificate)
        let log = TrafficLog()
        var configuration = Self.alice(server, sasl2: sasl2)
        configuration.resource = "phone"
        configuration.carbons = true
        var loggingOptions = options
        loggingOptions.logHandler = log.handler
        let phone = try XMPPClient(configuration: configuration, options: loggingOptions)
        let phoneEvents = EventRecorder(phone)
        try await phone.connect()
        // With SASL2: enabled inside the login (the log hides what the login sends; the server's
        // answer shows it), not by an iq of its own; the RFC 6120 way: by an iq.
        let received = log.entries.filter { $0.direction == .received }.map(\.text)
        #expect(
            received.contains { $0.contains("<enabled xmlns='urn:xmpp:carbons:2'/>") } == sasl2,
            "\(received.filter { $0.contains("success") })"
        )
        let sent = log.entries.filter { $0.direction == .sent }.map(\.text)
        #expect(sent.contains { $0.hasPrefix("<iq") && $0.contains("urn:xmpp:carbons:2") } == !sasl2, "\(sent)")

        var laptopConfiguration = testConfiguration("alice", port: server.port, resource: "laptop")
        laptopConfiguration.archiveCatchUp = nil
        let laptop = try XMPPClient(configuration: laptopConfiguration, options: XMPPClient.Options())
        try await laptop.connect()
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port, resource: "desk"))
        try await bob.connect()
        try await laptop.send(XMPPMessage(to: JID("bob@localhost/desk"), body: "from the laptop"))
        try await bob.send(XMPPMessage(to: laptop.connect(), body: "to the laptop"))
        #expect(await phoneEvents.wait { Self.messages($0).count >= 2 }, "\(phoneEvents.events)")
        let copies = Self.messages(phoneEvents.events)
        #expect(copies.contains { $0.origin == .carbon(sent: true) && $0.body == "from the laptop" })
        #expect(copies.contains { $0.origin == .carbon(sent: false) && $0.body == "to the laptop" })
        await phone.disconnect()
        await laptop.disconnect()
        await bob.disconnect()
    }

    @Test(arguments: [true, false])
    func pushReachesTheAppServer(sasl2: Bool) async throws {
        let (server, certificates) = try await Self.server()
        let options = XMPPClient.Options(caFile: certificates.caCertificate)
        // The stand-in app server: an XMPP entity that takes the server's pubsub publishes.
        var appConfiguration = testConfiguration("pushapp", port: server.port, resource: "app")
        appConfiguration.handledIQNamespaces = ["http://jabber.org/protocol/pubsub"]
        appConfiguration.archiveCatchUp = nil
        let appServer = try XMPPClient(configuration: appConfiguration)
        let appEvents = EventRecorder(appServer)
        let service = try await appServer.connect()
        func publishes() -> [XMPPIQ] {
            appEvents.events.compactMap { if case .iqRequest(let iq) = $0 { iq } else { nil } }
        }
        // The app server answers every publish.
        let answering = Task {
            var answered = 0
            while !Task.isCancelled {
                for iq in publishes().dropFirst(answered) { _ = try? await appServer.send(iq.result()) }
                answered = publishes().count
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        defer { answering.cancel() }
        let bob = try XMPPClient(configuration: testConfiguration("bob", port: server.port))
        try await bob.connect()

        // An account with no session: its registration is kept, and a message pushes.
        var offline = Self.alice(server, sasl2: sasl2)
        offline.push = XMPPPushRegistration(service: service, node: "offline-device", publishOptions: ["secret": "s1"])
        let first = try XMPPClient(configuration: offline, options: options)
        let firstEvents = EventRecorder(first)
        try await first.connect()
        #expect(await firstEvents.wait { $0.contains(.pushEnabled(offline.push!)) }, "\(firstEvents.events)")
        await first.disconnect()
        try await bob.send(XMPPMessage(to: JID("alice@localhost"), body: "you are offline"))
        #expect(
            await appEvents.wait(timeout: .seconds(10)) { _ in
                publishes().contains { Self.node(of: $0) == "offline-device" }
            },
            "\(appEvents.events)"
        )
        let push = try #require(publishes().first { Self.node(of: $0) == "offline-device" })
        #expect(Self.publishOption("secret", of: push) == "s1")
        #expect(push.from == JID("localhost"), "\(push.element)")  // the account's server publishes

        // A session whose socket died (the OS suspended the app): prosody hibernates it, and a
        // message for it pushes.
        let relay = try TCPRelay(upstreamPort: server.directTLSPort!)
        var hibernating = Self.alice(server, port: relay.port, sasl2: sasl2)
        hibernating.reconnectPolicy = nil
        hibernating.push = XMPPPushRegistration(service: service, node: "hibernated-device")
        let second = try XMPPClient(configuration: hibernating, options: options)
        let secondEvents = EventRecorder(second)
        try await second.connect()
        #expect(await secondEvents.wait { $0.contains(.pushEnabled(hibernating.push!)) }, "\(secondEvents.events)")
        #expect(await secondEvents.wait { $0.contains(.streamManagementEnabled(resumable: true)) })
        relay.cutAll()
        // The relay closes both sides at once: the client's loss means prosody's link is gone too.
        #expect(await secondEvents.wait { $0.contains { $0.isDisconnected } }, "\(secondEvents.events)")
        try await bob.send(XMPPMessage(to: JID("alice@localhost"), body: "you are asleep"))
        #expect(
            await appEvents.wait(timeout: .seconds(10)) { _ in
                publishes().contains { Self.node(of: $0) == "hibernated-device" }
            },
            "\(publishes().map(\.element))"
        )
        await second.disconnect()
        await bob.disconnect()
        await appServer.disconnect()
    }

    static func node(of iq: XMPPIQ) -> String? {
        iq.payload?.firstChild("publish", namespace: "http://jabber.org/protocol/pubsub")?.attribute("node")
    }

    static func publishOption(_ name: String, of iq: XMPPIQ) -> String? {
        let fields =
            iq.payload?.firstChild("publish-options", namespace: "http://jabber.org/protocol/pubsub")?
            .firstChild("x", namespace: "jabber:x:data")?.children("field") ?? []
        return fields.first { $0.attribute("var") == name }?.firstChild("value")?.text
    }
}
