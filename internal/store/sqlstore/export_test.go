package sqlstore

// WithFallbacks is withFallbacks, for the test of its query plan.
const WithFallbacks = withFallbacks
