import RelayCore
import RelayState

/// What an exchange needs to ask the admission store once its request is whole: the store, the keys, the
/// budgets and how to size the reservation. Built per request by `RelayHandler`; a plain value.
struct ExchangeAdmission: Sendable {
    var store: any AdmissionStore
    /// The per-address bucket's key.
    var address: String
    /// The authenticated identity (nil on `auth: "none"` routes).
    var identity: String?
    /// The budget's key (the identity, or the address on `auth: "none"` routes); nil without budgets.
    var budgetKey: String?
    var budgets: BudgetConfiguration?
    /// The route's `maxTokens.limit`: the ceiling of a request that names none.
    var routeMaxTokens: Int?
    /// Unix seconds: the budgets' UTC windows.
    var wallClock: @Sendable () -> Double

    /// What one request reserves (`RequestBodyPlan` sizes it).
    typealias Reservation = RequestBodyPlan.Reservation

    /// The body plan's part of the budgets: the sizes a reservation is made of; nil without budgets.
    var planBudgets: RequestBodyPlan.Settings.Budgets? {
        guard let budgets, budgetKey != nil else { return nil }
        return RequestBodyPlan.Settings.Budgets(routeMaxTokens: routeMaxTokens, defaultReserveTokens: budgets.defaultReserveTokens,
                                                mediaTokens: budgets.mediaTokens)
    }
}

extension ExchangeAdmission {
    /// The request's budget charge and the price it was admitted at (`BudgetCharge.of`).
    func charge(_ reservation: RequestBodyPlan.Reservation, model: String?, prices: PriceBook?, tier: ServiceTier, audio: Bool)
        -> Result<(charge: BudgetCharge?, price: ModelPrice?), RelayError> {
        BudgetCharge.of(reservation, budgetKey: budgetKey, budgets: budgets, model: model, prices: prices, tier: tier, audio: audio)
    }
}
