// The hub connection of earlier rounds: its event type is the one both clients share, and building
// it throws.
import TetherSignalRClient

func signalR() throws {
    // expected-error@+1 {{'LifecycleEvent' has been renamed to 'Event'}}
    let _: HubConnection.LifecycleEvent? = nil
    // expected-error@+4 {{call can throw but is not marked with 'try'}}
    // expected-note@+3 {{did you mean to use 'try'?}}
    // expected-note@+2 {{did you mean to handle error as optional value?}}
    // expected-note@+1 {{did you mean to disable error propagation?}}
    _ = HubConnectionBuilder(url: "https://example.com/chat").build()
}
