import Foundation
import Synchronization
import TetherXML

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

let ui = ExampleScreen()
let outbox = ExampleOutbox()

extension Notification.Name {
    static let saasMessage = Notification.Name("SaasMessage")
}
