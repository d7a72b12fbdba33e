import Foundation
import Synchronization
import TetherXML
import TetherXMPP

/// Stands in for the app's screen in the README's examples: records what they show.
final class ExampleScreen: Sendable {
    private let lines = Mutex<[String]>([])

    func show(_ text: String) {
        lines.withLock { $0.append(text) }
    }

    /// Everything shown so far.
    var shown: [String] { lines.withLock { $0 } }

    func clear() {
        lines.withLock { $0.removeAll() }
    }
}

/// Stands in for the app's outbox: stanzas to send again later.
final class ExampleOutbox: Sendable {
    private let stanzas = Mutex<[XElement]>([])

    func keep(_ more: [XElement]) {
        stanzas.withLock { $0 += more }
    }
}

/// Stands in for the app's keychain: the XMPP client's state between launches.
final class ExampleKeychain: Sendable {
    private let state = Mutex<XMPPClientState?>(nil)

    var savedState: XMPPClientState? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

let ui = ExampleScreen()
let keychain = ExampleKeychain()
let outbox = ExampleOutbox()

extension Notification.Name {
    static let saasMessage = Notification.Name("SaasMessage")
}
