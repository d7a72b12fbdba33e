import Foundation  // NotificationCenter
import TetherSignalRClient

struct ParamData: Codable, Sendable {
    var id: Int
    var userId: Int
    var niceName: String
    var jsonData: String
}

/// The app's hub: joins the user's group after every connect and reconnect, posts what it receives.
final class SaasHub: Sendable {
    let connection: HubConnection
    let userId: Int

    /// Throws when the hub could never be reached (not an http(s) URL, TLS without a TLS layer).
    init(url: String, userId: Int, token: @escaping @Sendable () async throws -> String?) throws(HubConnectionError) {
        self.userId = userId
        connection = try HubConnectionBuilder(url: url)
            .withHeaders(["X-Platform": "ios", "X-App-Version": "3.2"])
            .withAccessTokenProvider(token)  // asked again before every reconnect
            .withAutomaticReconnect(.tiered(repeats: false))  // ~5×3 s, 5×9 s, 5×15 s (±50 %), then suspended
            .withCallbackQueue(.main)
            .build()
        connection.on("ReciveSaasMessage") { (message: ParamData) in
            NotificationCenter.default.post(name: .saasMessage, object: message.jsonData)
        }
        connection.onReconnecting { error in ui.show("reconnecting: \(error.message)") }  // willReconnect
        connection.onReconnected { [self] _ in  // didReconnect: a new connection, so join again
            ui.show("online")
            Task { await joinGroup() }
        }
        connection.onSuspended { _ in ui.show("offline; tap to retry") }  // the policy gave up
        connection.onClosed { error in ui.show("closed: \(error?.message ?? "by the app")") }
    }

    func open() async {
        do {
            try await connection.start()  // negotiate, WebSocket, handshake
        } catch {
            ui.show("cannot connect: \(error.message)")  // didFailToOpen
            return
        }
        ui.show("online")  // didOpen
        await joinGroup()
    }

    /// The user tapped "retry", the app came to the foreground, or the network is back.
    func retry() {
        connection.reconnectNow()
    }

    /// Groups do not survive a new connection: called after every connect and reconnect.
    func joinGroup() async {
        do {
            try await connection.invoke("AddToGroup", ["PlatUserId": userId])
        } catch  where error.kind == .invocationFailed {
            ui.show("the hub refused the group: \(error.message)")  // the hub method threw
        } catch {
            ui.show("joining the group failed: \(error.message)")  // for example the connection closed
        }
    }
}
